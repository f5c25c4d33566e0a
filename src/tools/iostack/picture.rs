//! `iostack --svg FILE.svg`: per operation, a row of two charts over the same intervals: where
//! the calls' time went (a stacked column per interval: the shares of on CPU, run queue, OS
//! queue, device, others' I/O and other sleep in the time of the calls that ended in it, which
//! add up to 100%), and beside it the heat map of the calls' latency, which gives the scale: a
//! column of shares reads the same for 100 ms reads and 10 us ones (seen with a throttle lifted
//! halfway: on a linear scale of time per call the free half's columns were invisible).
//! Rewritten atomically after every interval.

use std::path::Path;

use anyhow::Result;
use plotters::prelude::*;

use crate::common::report::heatmap::{self, time_at, HeatMap, LEGEND_WIDTH, RUN_COLUMNS};
use crate::common::report::hist::Unit;
use crate::tools::iostack::breakdown::{Breakdown, PARTS, PART_NAMES};
use crate::tools::iostack::report::IostackReport;

/// The parts' colours, in the order of `PART_NAMES`: the CPU's green and amber, the OS queue
/// purple, the device dark blue, others' I/O light blue, sleep grey. Distinct from the heat
/// map's yellow-to-red ramp.
pub const PART_COLOURS: [RGBColor; PARTS] = [
    RGBColor(77, 175, 74),   // on CPU
    RGBColor(255, 191, 0),   // run queue
    RGBColor(152, 78, 163),  // OS queue
    RGBColor(31, 80, 180),   // device
    RGBColor(120, 180, 230), // others' I/O
    RGBColor(170, 170, 170), // other sleep
];

/// The width of the parts' legend, right of the heat map's.
const PARTS_LEGEND_WIDTH: u32 = 130;
/// The least height of an operation's row (the stacked columns need room).
const MIN_ROW_HEIGHT: u32 = 220;

/// The breakdown picture of a run so far (iostack --svg's file; the exporter's page, live).
#[derive(Clone)]
pub struct BreakdownPicture {
    /// The calls' latency, a panel per operation (`op` label).
    heat: HeatMap,
    /// Per operation in first-seen order: per column, where its calls' time went (None: no
    /// calls ended in that interval).
    ops: Vec<(String, Vec<Option<Breakdown>>)>,
}

impl BreakdownPicture {
    /// Keeping the last `columns` intervals.
    pub fn new(title: impl Into<String>, unit: Unit, columns: usize) -> BreakdownPicture {
        BreakdownPicture {
            heat: HeatMap::new(title, unit).with_max_columns(columns),
            ops: Vec::new(),
        }
    }

    /// iostack --svg's: the run's last `RUN_COLUMNS` intervals.
    pub fn for_run(title: impl Into<String>, unit: Unit) -> BreakdownPicture {
        BreakdownPicture::new(title, unit, RUN_COLUMNS)
    }

    /// Adds an interval's report as the next column (keeping the last columns asked for).
    pub fn push(&mut self, report: &IostackReport) {
        use crate::common::run::Render as _;
        let calls = report.heat().map(|h| h.histograms).unwrap_or_default();
        self.heat.push(report.time.clone(), &calls);
        let column = self.heat.columns() - 1;
        for (_, columns) in &mut self.ops {
            columns.push(None);
            // The heat map dropped its oldest column: so do the shares.
            columns.drain(..columns.len().saturating_sub(self.heat.columns()));
        }
        for op in &report.ops {
            let i = match self.ops.iter().position(|(name, _)| *name == op.op) {
                Some(i) => i,
                None => {
                    self.ops.push((op.op.clone(), vec![None; column + 1]));
                    self.ops.len() - 1
                }
            };
            self.ops[i].1[column] = Some(op.breakdown);
        }
    }

    /// The parts' shares (percent) of the calls' time in column `column` of operation `op`;
    /// None where no call ended or the calls took no time.
    pub fn shares(&self, op: usize, column: usize) -> Option<[f64; PARTS]> {
        let b = self.ops.get(op)?.1.get(column).copied().flatten()?;
        (b.total() > 0).then(|| b.percentages())
    }

    pub fn svg(&self) -> Result<String> {
        let rows = self.ops.len().max(1) as u32;
        let row_height = self.heat.panel_height().max(MIN_ROW_HEIGHT);
        let chart_width = 90 + self.heat.panel_width();
        let width = chart_width + 150 + self.heat.panel_width() + LEGEND_WIDTH + PARTS_LEGEND_WIDTH;
        let height = 30 + row_height * rows;
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
            root.fill(&WHITE).map_err(draw_error)?;
            let root = root
                .titled(self.heat.title(), ("sans-serif", 18))
                .map_err(draw_error)?;
            let (main, legends) =
                root.split_horizontally(width - LEGEND_WIDTH - PARTS_LEGEND_WIDTH);
            let (heat_legend, parts_legend) = legends.split_horizontally(LEGEND_WIDTH);
            for (i, row) in main.split_evenly((rows as usize, 1)).iter().enumerate() {
                let (left, right) = row.split_horizontally(chart_width);
                self.draw_breakdown(&left, i)?;
                let labels = self.ops.get(i).map(|(op, _)| vec![("op", op.clone())]);
                match labels.and_then(|l| self.heat.panel_of(&l)) {
                    Some(panel) => self.heat.draw_panel(&right, panel)?,
                    None => self.heat.draw_panel(&right, usize::MAX)?,
                };
            }
            self.heat.draw_legend(&heat_legend)?;
            draw_parts_legend(&parts_legend)?;
            root.present().map_err(draw_error)?;
        }
        Ok(svg)
    }

    /// Writes the picture to `path`, atomically.
    pub fn write(&self, path: &Path) -> Result<()> {
        heatmap::write_atomically(path, &self.svg()?)
    }

    /// Operation `i`'s stacked columns of shares.
    fn draw_breakdown<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, plotters::coord::Shift>,
        i: usize,
    ) -> Result<()> {
        let columns = self.heat.columns().max(1);
        let caption = match self.ops.get(i) {
            Some((op, _)) => format!("{op}: where the calls' time went"),
            None => "no calls yet".to_string(),
        };
        let mut chart = ChartBuilder::on(area)
            .caption(caption, ("sans-serif", 14))
            .margin(8)
            .x_label_area_size(32)
            .y_label_area_size(70)
            .build_cartesian_2d(0..columns as i32, 0.0..100.0)
            .map_err(draw_error)?;
        let times = self.heat.times();
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("interval ending at")
            .y_desc("share of the calls' time (%)")
            .x_labels(self.heat.time_labels())
            .y_labels(6)
            .x_label_formatter(&|&c| time_at(times, c))
            .y_label_formatter(&|&v| format!("{v:.0}"))
            .draw()
            .map_err(draw_error)?;
        let mut bars = Vec::new();
        for c in 0..columns {
            let Some(shares) = self.shares(i, c) else {
                continue;
            };
            let mut base = 0.0;
            for (p, &v) in shares.iter().enumerate() {
                if v > 0.0 {
                    let x = c as i32;
                    bars.push(Rectangle::new(
                        [(x, base), (x + 1, base + v)],
                        PART_COLOURS[p].filled(),
                    ));
                }
                base += v;
            }
        }
        chart.draw_series(bars).map_err(draw_error)?;
        Ok(())
    }
}

/// The parts' colours and names, top to bottom in the order they stack from the bottom.
fn draw_parts_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
) -> Result<()> {
    let style = ("sans-serif", 12).into_font();
    let top = 60;
    area.draw(&Text::new("time (stacked)", (4, top - 20), style.clone()))
        .map_err(draw_error)?;
    for (i, part) in PART_NAMES.iter().enumerate().rev() {
        let y = top + 20 * (PARTS - 1 - i) as i32;
        area.draw(&Rectangle::new(
            [(4, y), (18, y + 14)],
            PART_COLOURS[i].filled(),
        ))
        .map_err(draw_error)?;
        area.draw(&Text::new(part.text, (24, y + 1), style.clone()))
            .map_err(draw_error)?;
    }
    Ok(())
}

fn draw_error<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow::anyhow!("drawing the breakdown: {e:?}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::report::hist::LatencyHistogram;
    use crate::tools::iostack::report::{Layer, OpReport};

    fn report(time: &str, ops: &[(&str, u64, [u64; PARTS], usize)]) -> IostackReport {
        IostackReport {
            time: time.to_string(),
            unit: Unit::Usecs,
            ops: ops
                .iter()
                .map(|&(op, calls, parts, slot)| {
                    let mut hist = LatencyHistogram::default();
                    hist.slots[slot] = calls;
                    hist.count = calls;
                    OpReport {
                        op: op.to_string(),
                        calls,
                        ios: 0,
                        others_ios: 0,
                        breakdown: Breakdown {
                            parts,
                            via_waker_ns: 0,
                        },
                        layers: vec![(Layer::Syscall, hist)],
                    }
                })
                .collect(),
            requests: Vec::new(),
            request_losses: Default::default(),
            requests_in_flight: 0,
            missing: Vec::new(),
            unfollowed: Vec::new(),
            worker_wait_unsplit: None,
            unwaited: [0; 6],
            processes: None,
            cgroups: None,
            group_requests: None,
            losses: Vec::new(),
            accounted: Vec::new(),
        }
    }

    #[test]
    fn each_column_stacks_the_shares_of_its_intervals_calls_and_they_add_up_to_all() {
        let mut picture = BreakdownPicture::for_run("iostack", Unit::Usecs);
        // 4 reads of 100 ms: 1 ms on CPU, 99 ms in the OS queue.
        picture.push(&report(
            "10:00:01",
            &[("read", 4, [4_000_000, 0, 396_000_000, 0, 0, 0], 16)],
        ));
        // Then a write appears, and the reads go to the device.
        picture.push(&report(
            "10:00:02",
            &[
                ("read", 10, [0, 0, 0, 300_000, 0, 0], 4),
                ("write", 2, [2_000, 2_000, 0, 0, 0, 0], 1),
            ],
        ));
        assert_eq!(picture.shares(0, 0), Some([1.0, 0.0, 99.0, 0.0, 0.0, 0.0]));
        assert_eq!(picture.shares(0, 1), Some([0.0, 0.0, 0.0, 100.0, 0.0, 0.0]));
        assert_eq!(
            picture.shares(1, 0),
            None,
            "no writes in the first interval"
        );
        assert_eq!(picture.shares(1, 1), Some([50.0, 50.0, 0.0, 0.0, 0.0, 0.0]));
        for c in 0..2 {
            let total: f64 = picture.shares(0, c).unwrap().iter().sum();
            assert!((total - 100.0).abs() < 1e-9);
        }
        // Beside each, the heat map panel of the same operation's calls.
        assert_eq!(picture.heat.panel_of(&[("op", "write".into())]), Some(1));
        let svg = picture.svg().unwrap().replace("&apos;", "'");
        for text in [
            "read: where the calls' time went",
            "write: where the calls' time went",
            "op read",
            "op write",
            "share of the calls' time (%)",
            "OS queue",
            "others' I/O",
            "count (log)",
        ] {
            assert!(svg.contains(text), "no {text} in the SVG");
        }
        // The columns' parts in their colours: on CPU and OS queue, device, on CPU and run queue.
        for colour in [
            PART_COLOURS[0],
            PART_COLOURS[2],
            PART_COLOURS[3],
            PART_COLOURS[1],
        ] {
            let hex = format!("#{:02X}{:02X}{:02X}", colour.0, colour.1, colour.2);
            assert!(svg.contains(&hex), "no {hex} in the SVG");
        }
    }
}
