//! `/metrics`, encoded by the official `prometheus-client` crate from a copy of the exporter's
//! `Metrics`: OpenMetrics 1.0 when the scraper's Accept header asks for it (Prometheus does, first),
//! else the Prometheus text format 0.0.4 (curl, `promtool check metrics`, older scrapers). The
//! two spell `le` differently (`6.4e-5`, `6.4e-05`) and Prometheus 2 keeps `le` as written, but a
//! scraper asks the same way every time, so its series stay the same.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::series::{CounterUnit, Metrics};

/// The two exposition formats, and which one a scraper asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    PrometheusText,
    OpenMetrics,
}

impl Format {
    /// OpenMetrics if the Accept header names it at all (Prometheus sends
    /// `application/openmetrics-text;version=1.0.0,...;q=0.75,text/plain;version=0.0.4;q=0.5`),
    /// else the Prometheus text format, which every scraper takes.
    pub fn from_accept(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::PrometheusText,
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Format::PrometheusText => prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

#[derive(Debug)]
struct Snapshot(Metrics);

impl Collector for Snapshot {
    fn encode(&self, mut enc: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let m = &self.0;
        for family in &m.histograms {
            let mut metric =
                enc.encode_descriptor(family.name, family.help, None, MetricType::Histogram)?;
            for (labels, h) in &family.series {
                let labels: Vec<(&str, &str)> =
                    labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
                metric
                    .encode_family(&labels)?
                    .encode_histogram::<NoLabelSet>(
                        h.sum_seconds(),
                        h.count(),
                        &h.buckets(family.unit),
                        None,
                    )?;
            }
        }
        // The encoder adds `_total` to a counter's name.
        for family in &m.counters {
            let mut metric =
                enc.encode_descriptor(family.name, family.help, None, MetricType::Counter)?;
            for (labels, n) in &family.series {
                let labels: Vec<(&str, &str)> =
                    labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let value = family.value(*n);
                match family.unit {
                    CounterUnit::Nanoseconds => {
                        ConstCounter::new(value).encode(metric.encode_family(&labels)?)?
                    }
                    CounterUnit::Count => {
                        ConstCounter::new(*n).encode(metric.encode_family(&labels)?)?
                    }
                }
            }
        }
        let mut lost = enc.encode_descriptor(
            "iostack_lost_events",
            "Events the kernel side could not record, by layer and reason (unseen: I/Os /proc/diskstats counted that no program saw)",
            None,
            MetricType::Counter,
        )?;
        for ((layer, reason), n) in &m.lost {
            let labels = [("layer", layer.as_str()), ("reason", reason.as_str())];
            ConstCounter::new(*n).encode(lost.encode_family(&labels)?)?;
        }
        let mut up = enc.encode_descriptor(
            "iostack_layer_up",
            "1 if the layer is traced on this kernel, 0 if it cannot be (the reason is on /)",
            None,
            MetricType::Gauge,
        )?;
        for (layer, state) in &m.layers {
            let labels = [("layer", layer.as_str())];
            ConstGauge::new(i64::from(state.up)).encode(up.encode_family(&labels)?)?;
        }
        let mut supported = enc.encode_descriptor(
            "iostack_layer_supported",
            "1 if this kernel has the hooks the layer needs (a layer supported and not up failed: an outage), 0 if it cannot be traced here (not an outage)",
            None,
            MetricType::Gauge,
        )?;
        for (layer, state) in &m.layers {
            let labels = [("layer", layer.as_str())];
            ConstGauge::new(i64::from(state.supported))
                .encode(supported.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

/// The text of a scrape, in `format`.
pub fn encode(metrics: Metrics, format: Format) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Snapshot(metrics)));
    let mut out = String::new();
    // Writing into a String cannot fail.
    let _ = match format {
        Format::PrometheusText => {
            prometheus_client::encoding::prometheus_text::encode(&mut out, &registry)
        }
        Format::OpenMetrics => prometheus_client::encoding::text::encode(&mut out, &registry),
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::report::hist::{LatencyHistogram, Unit};
    use crate::tools::exporter::series::LayerState;

    /// Every one of `lines` is a whole line of `text`.
    fn assert_lines<S: AsRef<str>>(text: &str, lines: &[S]) {
        for line in lines {
            let line = line.as_ref();
            assert!(
                text.lines().any(|l| l == line),
                "no line {line} in:\n{text}"
            );
        }
    }

    fn sample() -> Metrics {
        let mut m = Metrics::default();
        let mut h = LatencyHistogram::default();
        h.slots[6] = 1_280_000; // [64, 128) us
        h.slots[7] = 3;
        h.count = 1_280_003;
        h.sum_ns = 1_500_000_000;
        m.family(
            "iostack_block_latency_seconds",
            "Block I/O latency",
            Unit::Usecs,
        )
        .add(
            vec![("disk", "we\"ird\\disk".into()), ("op", "read".into())],
            &h,
        );
        m.add_lost("block", "unseen", 2);
        m.layers.push((
            "block".into(),
            LayerState {
                up: true,
                supported: true,
                detail: String::new(),
            },
        ));
        m.layers.push((
            "fs".into(),
            LayerState {
                up: false,
                supported: false,
                detail: "no fentry".into(),
            },
        ));
        m
    }

    #[test]
    fn buckets_are_cumulative_exact_integers_with_the_sum_in_seconds() {
        let text = encode(sample(), Format::PrometheusText);
        let series = r#"{disk="we\"ird\\disk",op="read""#;
        assert_lines(
            &text,
            &[
                format!("iostack_block_latency_seconds_bucket{series},le=\"6.4e-05\"}} 0"),
                format!("iostack_block_latency_seconds_bucket{series},le=\"0.000128\"}} 1280000"),
                format!("iostack_block_latency_seconds_bucket{series},le=\"0.000256\"}} 1280003"),
                format!("iostack_block_latency_seconds_bucket{series},le=\"+Inf\"}} 1280003"),
                format!("iostack_block_latency_seconds_sum{series}}} 1.5"),
                format!("iostack_block_latency_seconds_count{series}}} 1280003"),
            ],
        );
    }

    #[test]
    fn losses_are_counters_and_layers_gauges() {
        let text = encode(sample(), Format::PrometheusText);
        assert_lines(
            &text,
            &[
                "# TYPE iostack_lost_events_total counter",
                "iostack_lost_events_total{layer=\"block\",reason=\"unseen\"} 2",
                "# TYPE iostack_layer_up gauge",
                "iostack_layer_up{layer=\"block\"} 1",
                "iostack_layer_up{layer=\"fs\"} 0",
                "# TYPE iostack_layer_supported gauge",
                "iostack_layer_supported{layer=\"block\"} 1",
                "iostack_layer_supported{layer=\"fs\"} 0",
            ],
        );
    }

    #[test]
    fn openmetrics_is_served_to_a_scraper_that_asks_for_it_with_the_same_exact_counts() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::from_accept(Some(prometheus)), Format::OpenMetrics);
        assert_eq!(Format::from_accept(Some("*/*")), Format::PrometheusText);
        assert_eq!(Format::from_accept(None), Format::PrometheusText);
        let text = encode(sample(), Format::OpenMetrics);
        let series = r#"disk="we\"ird\\disk",op="read""#;
        assert_lines(
            &text,
            &[
                // OpenMetrics' encoder writes `le` first.
                format!("iostack_block_latency_seconds_bucket{{le=\"0.000128\",{series}}} 1280000"),
                format!("iostack_block_latency_seconds_bucket{{le=\"+Inf\",{series}}} 1280003"),
                format!("iostack_block_latency_seconds_count{{{series}}} 1280003"),
                "iostack_lost_events_total{layer=\"block\",reason=\"unseen\"} 2".to_string(),
                "# EOF".to_string(),
            ],
        );
    }
}
