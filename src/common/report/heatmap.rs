//! Latency heat maps (`--heatmap FILE.svg`): time across, one column per interval; latency up,
//! one row per log2 bucket of the kernel's histograms; colour by how many, on a log scale (so
//! that one outlier and ten thousand fast I/Os both show), with its legend; one panel per
//! histogram label set (`-D` disks, `-F` ops...). Drawn with plotters' SVG backend, whose text
//! is SVG text (no font is read or embedded). The file is rewritten atomically after every
//! interval, so that a browser tab on it shows the run so far.

use std::collections::VecDeque;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{anyhow, Context, Result};
use plotters::prelude::*;

use super::hist::{Unit, LOG2_SLOTS};
use super::LabeledHistogram;

/// A panel's labels, as the histograms carry them.
pub type Labels = Vec<(&'static str, String)>;

/// Counts per interval and bucket, per label set, and the intervals' end times. Only the
/// cells with a count are kept (a few of a column's 32 buckets): the exporter keeps 300 columns
/// of every family's panels, and a dense column of 32 counters per panel grew its RSS by 1.5 MB a
/// minute in the 2-minute soak (2026-11-26; 16 bytes a cell kept now).
#[derive(Clone, Debug)]
pub struct HeatMap {
    title: String,
    unit: Unit,
    /// When each kept column's interval ended (HH:MM:SS), oldest first.
    times: VecDeque<String>,
    /// How many columns were dropped before the first kept one (columns are numbered from the
    /// first ever pushed).
    dropped: u64,
    /// Per label set in first-seen order: its cells with a count, by column.
    panels: Vec<(Labels, VecDeque<Stored>)>,
    /// The most columns kept (the oldest go first); None: every interval of the run.
    max_columns: Option<usize>,
}

/// A cell with a count: its column (numbered from the first pushed), bucket and count.
#[derive(Clone, Copy, Debug)]
struct Stored {
    column: u64,
    slot: u8,
    count: u32,
}

/// A cell and the pixel rectangle it was drawn in (top left, bottom right).
pub type Placed = (Cell, [(i32, i32); 2]);

/// A run's picture keeps its last 1200 intervals (the most a panel's 1200 pixels show; a run
/// of days would otherwise redraw every interval it ever had, every interval).
pub const RUN_COLUMNS: usize = 1200;

/// The width in pixels of the colour legend at the right.
pub const LEGEND_WIDTH: u32 = 110;

/// One drawn cell: `count` latencies in bucket `slot` ([2^slot, 2^(slot+1)) units; slot 0 is 0
/// and 1) during
/// column `column`'s interval, in panel `panel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cell {
    pub panel: usize,
    pub column: usize,
    pub slot: usize,
    pub count: u64,
}

impl HeatMap {
    pub fn new(title: impl Into<String>, unit: Unit) -> HeatMap {
        HeatMap {
            title: title.into(),
            unit,
            times: VecDeque::new(),
            dropped: 0,
            panels: Vec::new(),
            max_columns: None,
        }
    }

    /// Keeps only the last `n` columns (a live page of a daemon that runs for months).
    pub fn with_max_columns(mut self, n: usize) -> HeatMap {
        self.max_columns = Some(n.max(1));
        self
    }

    /// Adds one interval's histograms as the next column.
    pub fn push(&mut self, time: impl Into<String>, histograms: &[LabeledHistogram]) {
        let column = self.dropped + self.times.len() as u64;
        self.times.push_back(time.into());
        for h in histograms {
            let i = match self.panels.iter().position(|(l, _)| *l == h.labels) {
                Some(i) => i,
                None => {
                    self.panels.push((h.labels.clone(), VecDeque::new()));
                    self.panels.len() - 1
                }
            };
            let cells = &mut self.panels[i].1;
            for (slot, &n) in h.hist.slots.iter().enumerate().filter(|(_, &n)| n > 0) {
                // Two histograms with one label set (the exporter drops a label) add up.
                let count = n.min(u32::MAX as u64) as u32;
                match cells
                    .iter_mut()
                    .rev()
                    .take_while(|c| c.column == column)
                    .find(|c| c.slot as usize == slot)
                {
                    Some(c) => c.count = c.count.saturating_add(count),
                    None => cells.push_back(Stored {
                        column,
                        slot: slot as u8,
                        count,
                    }),
                }
            }
        }
        if let Some(max) = self.max_columns {
            while self.times.len() > max {
                self.times.pop_front();
                self.dropped += 1;
            }
            let first = self.dropped;
            for (_, cells) in &mut self.panels {
                while cells.front().is_some_and(|c| c.column < first) {
                    cells.pop_front();
                }
            }
            // A label set with nothing left in the window (a disk that went) goes too.
            self.panels.retain(|(_, cells)| !cells.is_empty());
        }
    }

    pub fn title(&self) -> &str {
        &self.title
    }

    /// When each column's interval ended.
    pub fn times(&self) -> &VecDeque<String> {
        &self.times
    }

    pub fn columns(&self) -> usize {
        self.times.len()
    }

    /// Every non-empty cell, by panel then column.
    pub fn cells(&self) -> Vec<Cell> {
        (0..self.panels.len())
            .flat_map(|p| self.panel_cells(p))
            .collect()
    }

    /// Panel `panel`'s non-empty cells, by column then bucket.
    fn panel_cells(&self, panel: usize) -> Vec<Cell> {
        let Some((_, stored)) = self.panels.get(panel) else {
            return Vec::new();
        };
        let mut cells: Vec<Cell> = stored
            .iter()
            .map(|c| Cell {
                panel,
                column: (c.column - self.dropped) as usize,
                slot: c.slot as usize,
                count: c.count as u64,
            })
            .collect();
        cells.sort_by_key(|c| (c.column, c.slot));
        cells
    }

    /// Every kept cell, of every panel, in no order.
    fn stored(&self) -> impl Iterator<Item = &Stored> {
        self.panels.iter().flat_map(|(_, cells)| cells.iter())
    }

    /// The rows drawn: from the lowest bucket any cell uses to the highest, at least 8 rows.
    pub fn rows(&self) -> (usize, usize) {
        let slots = || self.stored().map(|c| c.slot as usize);
        let low = slots().min().unwrap_or(0);
        let high = slots().max().unwrap_or(0);
        let high = high.max(low + 7).min(LOG2_SLOTS - 1);
        (high.saturating_sub(7).min(low), high)
    }

    /// The SVG of everything pushed so far.
    pub fn svg(&self) -> Result<String> {
        Ok(self.draw()?.0)
    }

    /// The SVG, and where each cell was drawn: its pixel rectangle (top left, bottom right),
    /// for tests that read a rendering's pixels.
    pub fn draw(&self) -> Result<(String, Vec<Placed>)> {
        let mut placed = Vec::new();
        let panels = self.panels.len().max(1) as u32;
        let width = 150 + self.panel_width() + LEGEND_WIDTH;
        let height = 30 + self.panel_height() * panels;
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
            root.fill(&WHITE).map_err(draw_error)?;
            let root = root
                .titled(&self.title, ("sans-serif", 18))
                .map_err(draw_error)?;
            let (main, legend) = root.split_horizontally(width - LEGEND_WIDTH);
            let areas = main.split_evenly((panels as usize, 1));
            for (i, area) in areas.iter().enumerate() {
                placed.extend(self.draw_panel(area, i)?);
            }
            self.draw_legend(&legend)?;
            root.present().map_err(draw_error)?;
        }
        Ok((svg, placed))
    }

    /// The width in pixels that a panel's cells take: 60 a column (room for its time label)
    /// up to 20 columns, then the same 1200 shared by more (a live page's 300 seconds: 4
    /// each); 320 at least.
    pub fn panel_width(&self) -> u32 {
        (60 * self.columns() as u32).clamp(320, 1200)
    }

    /// How many of the columns' boundaries get a time label: every one while a column is 60
    /// pixels wide (a label is about 50), fewer after.
    pub fn time_labels(&self) -> usize {
        self.columns().min(self.panel_width() as usize / 60).max(1)
    }

    /// The height in pixels of a panel: 16 per row, its caption and its time axis.
    pub fn panel_height(&self) -> u32 {
        let (low, high) = self.rows();
        70 + 16 * (high - low + 1) as u32
    }

    /// The panel whose labels are `labels`, if any interval had them.
    pub fn panel_of(&self, labels: &[(&'static str, String)]) -> Option<usize> {
        self.panels.iter().position(|(l, _)| l == labels)
    }

    /// The largest count of any cell (the legend's top).
    pub fn max_count(&self) -> u64 {
        self.stored().map(|c| c.count as u64).max().unwrap_or(1)
    }

    /// Draws panel `i` (its caption, axes and cells; "no events yet" when there is none) into
    /// `area`, on the colour scale of the whole map; returns where its cells went.
    pub fn draw_panel<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, plotters::coord::Shift>,
        i: usize,
    ) -> Result<Vec<Placed>> {
        let cells = self.panel_cells(i);
        let max = self.max_count();
        let (low, high) = self.rows();
        let rows = high - low + 1;
        let columns = self.columns().max(1);
        let caption = match self.panels.get(i) {
            Some((labels, _)) if !labels.is_empty() => labels
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", "),
            Some(_) => "all".to_string(),
            None => "no events yet".to_string(),
        };
        let mut chart = ChartBuilder::on(area)
            .caption(caption, ("sans-serif", 14))
            .margin(8)
            .x_label_area_size(32)
            .y_label_area_size(70)
            .build_cartesian_2d(0..columns as i32, low as i32..high as i32 + 1)
            .map_err(draw_error)?;
        let (times, unit) = (&self.times, self.unit);
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("interval ending at")
            .y_desc("latency")
            .x_labels(self.time_labels())
            .y_labels(rows + 1)
            .x_label_formatter(&|&c| time_at(times, c))
            .y_label_formatter(&|&slot| bucket_bound(slot as usize, unit))
            .draw()
            .map_err(draw_error)?;
        let mut placed = Vec::new();
        for c in &cells {
            let (x, y) = (c.column as i32, c.slot as i32);
            let a = chart.backend_coord(&(x, y + 1));
            let b = chart.backend_coord(&(x + 1, y));
            placed.push((*c, [a, b]));
        }
        chart
            .draw_series(cells.iter().map(|c| {
                let (x, y) = (c.column as i32, c.slot as i32);
                Rectangle::new([(x, y), (x + 1, y + 1)], colour(c.count, max).filled())
            }))
            .map_err(draw_error)?;
        Ok(placed)
    }

    /// The legend: the colour ramp with the counts it stands for, 1 to the most, log scale.
    pub fn draw_legend<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, plotters::coord::Shift>,
    ) -> Result<()> {
        let max = self.max_count();
        let steps = 10;
        let (_, h) = area.dim_in_pixel();
        let top = 60i32;
        let bar = (h as i32 - top - 40).clamp(100, 300);
        let style = ("sans-serif", 12).into_font();
        area.draw(&Text::new("count (log)", (4, top - 20), style.clone()))
            .map_err(draw_error)?;
        for i in 0..steps {
            // From the most (top) to one (bottom).
            let t = 1.0 - i as f64 / (steps - 1) as f64;
            let count = ((max.max(1) as f64).powf(t).round() as u64).max(1);
            let y0 = top + i * bar / steps;
            let y1 = top + (i + 1) * bar / steps;
            area.draw(&Rectangle::new(
                [(4, y0), (24, y1)],
                colour(count, max).filled(),
            ))
            .map_err(draw_error)?;
            area.draw(&Text::new(count.to_string(), (30, y0 + 2), style.clone()))
                .map_err(draw_error)?;
        }
        Ok(())
    }

    /// Writes the SVG to `path` atomically (a temporary file beside it, renamed over it).
    pub fn write(&self, path: &Path) -> Result<()> {
        write_atomically(path, &self.svg()?)
    }
}

/// Writes `svg` to `path` atomically: a new temporary file beside it (named for this process,
/// never an existing file or link followed), renamed over it, so that a browser tab reloading it
/// never sees half a picture. Not synced: the tools' own fdatasync every interval showed in the
/// sync panel of syslat and vfslat, and a rename is atomic without it.
pub fn write_atomically(path: &Path, svg: &str) -> Result<()> {
    let tmp = temporary_beside(path);
    let written = create_new(&tmp).and_then(|mut f| f.write_all(svg.as_bytes()));
    let renamed = written.and_then(|_| fs::rename(&tmp, path));
    if renamed.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    renamed.with_context(|| format!("cannot write {}", path.display()))
}

fn create_new(path: &Path) -> std::io::Result<fs::File> {
    // A temporary file left by a process of this pid that died: ours to replace.
    let _ = fs::remove_file(path);
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

/// Checks a picture's arguments before anything is traced: an interval (a column each) and a
/// file that can be written (its temporary file is made and removed). The errors say what to do.
pub fn check_picture_arg(
    flag: &str,
    path: &Path,
    common: &crate::common::run::cli::CommonArgs,
) -> Result<()> {
    if common.explain {
        return Ok(());
    }
    if common.interval.is_none() {
        return Err(anyhow!(
            "{flag} draws a column per interval: add one at the end, e.g. `{} 1`",
            command_line()
        ));
    }
    if path.is_dir() || path.file_name().is_none() {
        return Err(anyhow!(
            "{flag} {}: that is a directory: give a file, e.g. {}",
            path.display(),
            path.join("picture.svg").display()
        ));
    }
    let tmp = temporary_beside(path);
    create_new(&tmp).map_err(|e| {
        anyhow!(
            "{flag} {}: cannot write there ({e}): choose a path in a writable directory",
            path.display()
        )
    })?;
    let _ = fs::remove_file(&tmp);
    Ok(())
}

/// Says once, in one line, that a picture could not be rewritten (a full disk, a directory
/// gone): the reports go on, the picture keeps its last good state.
pub fn warn_unwritten(tool: &str, flag: &str, path: &Path, written: Result<()>) {
    static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if let Err(e) = written {
        if !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
            eprintln!(
                "{tool}: {flag} {}: {:#}: the reports go on; free some space or fix the path",
                path.display(),
                e
            );
        }
    }
}

fn temporary_beside(path: &Path) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(format!(".{}.tmp", std::process::id()));
    path.with_file_name(name)
}

/// The command line that made a picture (its title): the program's name without its directory,
/// and its arguments.
pub fn command_line() -> String {
    let mut args = std::env::args_os().map(|a| a.to_string_lossy().into_owned());
    let program = args.next().unwrap_or_default();
    let program = Path::new(&program)
        .file_name()
        .map_or(program.clone(), |n| n.to_string_lossy().into_owned());
    std::iter::once(program)
        .chain(args)
        .collect::<Vec<_>>()
        .join(" ")
}

fn draw_error<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("drawing the heat map: {e:?}")
}

/// The lower bound of bucket `slot` ([2^slot, 2^(slot+1)) units; 0 for slot 0), as a person
/// reads it: `0us`, `2us`,
/// `16ms`, `1.05s`.
pub fn bucket_bound(slot: usize, unit: Unit) -> String {
    if slot == 0 {
        // Slot 0 holds 0 and 1 (a log2 histogram's first bucket).
        return format!("0{}", unit.short_name());
    }
    let ns = (1u64 << slot.min(62)) as f64 * unit.ns() as f64;
    let (v, suffix) = match ns {
        ns if ns >= 1e9 => (ns / 1e9, "s"),
        ns if ns >= 1e6 => (ns / 1e6, "ms"),
        ns => (ns / 1e3, "us"),
    };
    match v {
        v if v >= 100.0 || v.fract() == 0.0 => format!("{v:.0}{suffix}"),
        v if v >= 10.0 => format!("{v:.1}{suffix}"),
        v => format!("{v:.2}{suffix}"),
    }
}

/// The colour of `count` among counts up to `max`: on a log scale (ln count / ln max) along a
/// ramp from pale yellow (one) to dark red (the most); darker means more, to one 8-bit step
/// (counts a few percent apart near the top may share a colour).
pub fn colour(count: u64, max: u64) -> RGBColor {
    const RAMP: [(f64, f64, f64); 3] = [
        (255.0, 237.0, 160.0),
        (240.0, 59.0, 32.0),
        (128.0, 0.0, 38.0),
    ];
    let t = match max {
        0 | 1 => 1.0,
        max => (count.max(1) as f64).ln() / (max as f64).ln(),
    }
    .clamp(0.0, 1.0);
    let (a, b, f) = match t {
        t if t < 0.5 => (RAMP[0], RAMP[1], t * 2.0),
        t => (RAMP[1], RAMP[2], (t - 0.5) * 2.0),
    };
    let mix = |x: f64, y: f64| (x + (y - x) * f).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// The label under column boundary `c`: the end time of the interval left of it.
pub fn time_at(times: &VecDeque<String>, c: i32) -> String {
    match c {
        c if c > 0 => times.get(c as usize - 1).cloned().unwrap_or_default(),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::report::hist::LatencyHistogram;

    fn labeled(labels: &[(&'static str, &str)], slots: &[(usize, u64)]) -> LabeledHistogram {
        let mut hist = LatencyHistogram::default();
        for &(k, n) in slots {
            hist.slots[k] = n;
            hist.count += n;
        }
        LabeledHistogram {
            labels: labels.iter().map(|(k, v)| (*k, v.to_string())).collect(),
            hist,
        }
    }

    #[test]
    fn each_cell_holds_its_intervals_count_for_its_bucket_and_label() {
        let mut map = HeatMap::new("biolat", Unit::Usecs);
        map.push("10:00:01", &[labeled(&[("disk", "vda")], &[(14, 40)])]);
        map.push(
            "10:00:02",
            &[
                labeled(&[("disk", "vda")], &[(3, 7), (4, 1)]),
                labeled(&[("disk", "vdb")], &[(9, 2)]),
            ],
        );
        let cell = |panel, column, slot, count| Cell {
            panel,
            column,
            slot,
            count,
        };
        assert_eq!(
            map.cells(),
            [
                cell(0, 0, 14, 40),
                cell(0, 1, 3, 7),
                cell(0, 1, 4, 1),
                // vdb appeared in the second interval: nothing in its first column.
                cell(1, 1, 9, 2),
            ]
        );
        assert_eq!(map.rows(), (3, 14));
    }

    #[test]
    fn a_live_map_keeps_its_last_columns_and_drops_what_left_the_window() {
        let mut map = HeatMap::new("exporter", Unit::Usecs).with_max_columns(2);
        map.push("1", &[labeled(&[("disk", "gone")], &[(1, 1)])]);
        map.push("2", &[labeled(&[("disk", "vda")], &[(2, 2)])]);
        map.push("3", &[labeled(&[("disk", "vda")], &[(3, 3)])]);
        assert_eq!(map.columns(), 2);
        let cells: Vec<(usize, usize, usize, u64)> = map
            .cells()
            .iter()
            .map(|c| (c.panel, c.column, c.slot, c.count))
            .collect();
        assert_eq!(
            cells,
            [(0, 0, 2, 2), (0, 1, 3, 3)],
            "vda's two columns, gone's panel dropped"
        );
    }

    #[test]
    fn darker_means_more() {
        let luminance =
            |c: RGBColor| 0.2126 * c.0 as f64 + 0.7152 * c.1 as f64 + 0.0722 * c.2 as f64;
        let max = 100_000;
        let mut last = f64::INFINITY;
        for count in [1, 2, 5, 10, 100, 1000, 10_000, 50_000, 100_000] {
            let l = luminance(colour(count, max));
            assert!(l < last, "{count}: luminance {l} not below {last}");
            last = l;
        }
    }

    #[test]
    fn bucket_bounds_read_as_times() {
        assert_eq!(bucket_bound(0, Unit::Usecs), "0us");
        assert_eq!(bucket_bound(1, Unit::Usecs), "2us");
        assert_eq!(bucket_bound(4, Unit::Usecs), "16us");
        assert_eq!(bucket_bound(14, Unit::Usecs), "16.4ms");
        assert_eq!(bucket_bound(4, Unit::Msecs), "16ms");
        assert_eq!(bucket_bound(10, Unit::Msecs), "1.02s");
    }

    #[test]
    fn longer_latencies_are_drawn_higher_and_later_intervals_further_right() {
        let mut map = HeatMap::new("syslat", Unit::Usecs);
        map.push("10:00:01", &[labeled(&[], &[(14, 40)])]);
        map.push("10:00:02", &[labeled(&[], &[(3, 900)])]);
        let (svg, placed) = map.draw().unwrap();
        assert_eq!(placed.len(), 2);
        let (slow, fast) = (placed[0].1, placed[1].1);
        assert!(
            slow[1].1 < fast[0].1,
            "the 16 ms cell is above the 8 us one: {placed:?}"
        );
        assert!(
            slow[1].0 <= fast[0].0,
            "the first interval is left of the second: {placed:?}"
        );
        assert!(
            svg.contains(&format!("x=\"{}\"", slow[0].0)),
            "drawn where placed"
        );
    }

    #[test]
    fn the_svg_names_the_panels_and_the_axes() {
        let mut map = HeatMap::new("biolat -D", Unit::Usecs);
        map.push("10:00:01", &[labeled(&[("disk", "vda")], &[(14, 40)])]);
        let svg = map.svg().unwrap();
        for text in [
            "biolat -D",
            "disk vda",
            "latency",
            "interval ending at",
            "10:00:01",
            "16.4ms",
            "count (log)",
        ] {
            assert!(svg.contains(text), "no {text} in the SVG");
        }
    }
}
