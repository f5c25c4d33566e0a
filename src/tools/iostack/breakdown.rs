//! A call's time in parts that add up to it (`src/bpf/lib/breakdown.h`): the figures, their
//! names in text and JSON, and the one-line bar.

use serde_json::{json, Map, Value};

/// The parts, in the order of `enum part`.
pub const PARTS: usize = 6;

/// One part: its JSON name, its name in text, and its letter in the bar.
pub struct Part {
    pub json: &'static str,
    /// The exporter's `part` label.
    pub metric: &'static str,
    pub text: &'static str,
    pub letter: char,
}

pub const PART_NAMES: [Part; PARTS] = [
    Part {
        json: "on_cpu_ns",
        metric: "on_cpu",
        text: "on CPU",
        letter: 'C',
    },
    Part {
        json: "run_queue_ns",
        metric: "run_queue",
        text: "run queue",
        letter: 'R',
    },
    Part {
        json: "io_queue_ns",
        metric: "os_queue",
        text: "OS queue",
        letter: 'Q',
    },
    Part {
        json: "io_device_ns",
        metric: "device",
        text: "device",
        letter: 'D',
    },
    Part {
        json: "others_io_ns",
        metric: "others_io",
        text: "others' I/O",
        letter: 'O',
    },
    Part {
        json: "other_sleep_ns",
        metric: "other_sleep",
        text: "other sleep",
        letter: 'S',
    },
];

/// The bar's legend, printed once above the first bar.
pub fn legend() -> String {
    let keys: Vec<String> = PART_NAMES
        .iter()
        .map(|p| format!("{}={}", p.letter, p.text))
        .collect();
    format!("time: {}", keys.join("  "))
}

/// Where the time of some calls went, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Breakdown {
    pub parts: [u64; PARTS],
    /// Of `others' I/O`: the part charged through a waker's own I/O waits (the journal's
    /// commit an fsync waited for through jbd2).
    pub via_waker_ns: u64,
}

impl Breakdown {
    pub fn total(&self) -> u64 {
        self.parts.iter().sum()
    }

    pub fn add(&mut self, other: &Breakdown) {
        for (a, b) in self.parts.iter_mut().zip(other.parts) {
            *a += b;
        }
        self.via_waker_ns += other.via_waker_ns;
    }

    /// The time waiting for block I/O: OS queue, device and others' I/O.
    pub fn io_wait(&self) -> u64 {
        self.parts[2] + self.parts[3] + self.parts[4]
    }

    /// Each part's share in percent.
    pub fn percentages(&self) -> [f64; PARTS] {
        let total = self.total();
        std::array::from_fn(|i| {
            if total == 0 {
                0.0
            } else {
                self.parts[i] as f64 * 100.0 / total as f64
            }
        })
    }

    /// `width` letters, each part's as many as its share (largest remainders round up, so
    /// the letters always fill the bar; a part with any time gets at least one letter while
    /// there is room).
    pub fn bar(&self, width: usize) -> String {
        let total = self.total();
        if total == 0 {
            return " ".repeat(width);
        }
        let exact: Vec<f64> = self
            .parts
            .iter()
            .map(|&p| p as f64 * width as f64 / total as f64)
            .collect();
        // Every part with time gets a letter first (a 10 µs part of a 1 s call is still a
        // part the reader should see); the largest parts give those letters back.
        let mut cells: Vec<usize> = (0..PARTS)
            .map(|i| {
                let floor = exact[i].floor() as usize;
                if self.parts[i] > 0 {
                    floor.max(1)
                } else {
                    floor
                }
            })
            .collect();
        while cells.iter().sum::<usize>() > width {
            let largest = (0..PARTS).max_by_key(|&i| cells[i]).unwrap_or(0);
            if cells[largest] <= 1 {
                break;
            }
            cells[largest] -= 1;
        }
        let mut order: Vec<usize> = (0..PARTS).collect();
        order.sort_by(|&a, &b| {
            let ra = exact[a] - cells[a] as f64;
            let rb = exact[b] - cells[b] as f64;
            rb.total_cmp(&ra)
        });
        let mut left = width.saturating_sub(cells.iter().sum::<usize>());
        for i in order.into_iter().cycle().take(PARTS * width.max(1)) {
            if left == 0 {
                break;
            }
            if self.parts[i] > 0 {
                cells[i] += 1;
                left -= 1;
            }
        }
        PART_NAMES
            .iter()
            .zip(cells)
            .map(|(p, n)| p.letter.to_string().repeat(n))
            .collect()
    }

    /// `on CPU 1.2%  run queue 0.1%  ...`
    pub fn shares(&self) -> String {
        let pct = self.percentages();
        let mut parts: Vec<String> = PART_NAMES
            .iter()
            .zip(pct)
            .map(|(p, v)| format!("{} {}%", p.text, fmt_pct(v)))
            .collect();
        if self.via_waker_ns > 0 && self.total() > 0 {
            let via = self.via_waker_ns as f64 * 100.0 / self.total() as f64;
            parts[4].push_str(&format!(" (through a waker {}%)", fmt_pct(via)));
        }
        parts.join("  ")
    }

    /// `{"total_ns": ..., "on_cpu_ns": ..., ...}`: the parts add up to `total_ns`.
    pub fn json(&self) -> Value {
        let mut m = Map::new();
        m.insert("total_ns".into(), json!(self.total()));
        for (p, v) in PART_NAMES.iter().zip(self.parts) {
            m.insert(p.json.into(), json!(v));
        }
        m.insert("others_io_via_waker_ns".into(), json!(self.via_waker_ns));
        Value::Object(m)
    }
}

fn fmt_pct(v: f64) -> String {
    if v == 0.0 {
        "0".into()
    } else if v < 0.1 {
        "<0.1".into()
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_is_as_wide_as_asked_and_ordered_by_part() {
        let b = Breakdown {
            parts: [10, 0, 900, 80, 0, 10],
            via_waker_ns: 0,
        };
        let bar = b.bar(50);
        assert_eq!(bar.chars().count(), 50);
        assert_eq!(bar, format!("C{}DDDDS", "Q".repeat(44)));
        assert_eq!(Breakdown::default().bar(5), "     ");
    }

    #[test]
    fn every_part_with_time_shows_and_the_letters_add_up() {
        let b = Breakdown {
            parts: [1, 1, 1, 1, 1, 10_000],
            via_waker_ns: 0,
        };
        let bar = b.bar(20);
        assert_eq!(bar.chars().count(), 20);
        for p in PART_NAMES {
            assert!(bar.contains(p.letter), "{bar}");
        }
    }

    #[test]
    fn json_parts_add_up_to_the_total() {
        let b = Breakdown {
            parts: [1, 2, 3, 4, 5, 6],
            via_waker_ns: 4,
        };
        let v = b.json();
        let sum: u64 = PART_NAMES.iter().map(|p| v[p.json].as_u64().unwrap()).sum();
        assert_eq!(sum, v["total_ns"].as_u64().unwrap());
        assert_eq!(v["others_io_via_waker_ns"], 4);
        assert!(b
            .shares()
            .contains("others' I/O 23.8% (through a waker 19.0%)"));
    }
}
