//! The exporter's HTTP side (tiny_http, one blocking thread): `/metrics` in the format the
//! scraper asks for, `/` a small page of the layers, how they are hooked, and the losses.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use anyhow::{anyhow, Result};
use tiny_http::{Header, Response, Server};

use super::encode::{encode, Format};
use super::layers::Drawings;
use super::series::Metrics;

pub struct Bound(Server);

impl Bound {
    pub fn address(&self) -> String {
        self.0.server_addr().to_string()
    }
}

/// Binds `listen` (ADDR:PORT): a one-line error for an address that does not parse or a port
/// that is taken.
pub fn bind(listen: &str) -> Result<Bound> {
    let addr: std::net::SocketAddr = listen.parse().map_err(|_| {
        anyhow!("--listen '{listen}' is not an address and port (e.g. 0.0.0.0:9709, 127.0.0.1:9709, [::1]:9709)")
    })?;
    Server::http(addr).map(Bound).map_err(|e| {
        match e.downcast_ref::<std::io::Error>().map(|io| io.kind()) {
            Some(std::io::ErrorKind::AddrInUse) => anyhow!(
                "port {} is in use on {}: stop what listens there (ss -ltnp 'sport = :{}') or choose another with --listen",
                addr.port(),
                addr.ip(),
                addr.port()
            ),
            _ => anyhow!("cannot listen on {listen}: {e}"),
        }
    })
}

/// The serving thread, stopped by `stop`.
pub struct Serving {
    server: Arc<Server>,
    stopping: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Serving {
    pub fn stop(mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.server.unblock();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Serves scrapes from a copy of `metrics` each: the lock is held only to copy.
pub fn serve(
    bound: Bound,
    metrics: Arc<Mutex<Metrics>>,
    pictures: super::layers::Pictures,
) -> Serving {
    let server = Arc::new(bound.0);
    let stopping = Arc::new(AtomicBool::new(false));
    let thread = {
        let (server, stopping) = (server.clone(), stopping.clone());
        std::thread::spawn(move || {
            while !stopping.load(Ordering::SeqCst) {
                // An error here means the accept thread is gone: nothing more will come.
                let Ok(request) = server.recv() else { break };
                let snapshot = match metrics.lock() {
                    Ok(m) => m.clone(),
                    Err(_) => break,
                };
                let path = request.url().split('?').next().unwrap_or("").to_string();
                let accept = request
                    .headers()
                    .iter()
                    .find(|h| h.field.equiv("Accept"))
                    .map(|h| h.value.as_str().to_string());
                let format = Format::from_accept(accept.as_deref());
                let response = match path.as_str() {
                    "/metrics" => Response::from_string(encode(snapshot, format))
                        .with_header(header("Content-Type", format.content_type())),
                    "/" => Response::from_string(index(
                        &snapshot,
                        pictures
                            .lock()
                            .map(|p| p.clone())
                            .map_err(|_| "the pictures are not available (their lock is poisoned)"),
                    ))
                    .with_header(header("Content-Type", "text/html; charset=utf-8")),
                    _ => Response::from_string("not found: try /metrics\n").with_status_code(404),
                };
                // A scraper that hung up is no concern of ours.
                let _ = request.respond(response);
            }
        })
    };
    Serving {
        server,
        stopping,
        thread: Some(thread),
    }
}

fn header(name: &str, value: &str) -> Header {
    // Both are ASCII constants of ours.
    Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("a valid header")
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// `/`: where the I/O calls' time went, beside their heat map; the io_uring and AIO requests;
/// readahead's pages; the losses;
/// each family's heat map of its last intervals; each layer, up or not, with its hooks or the
/// reason. Inline SVG, nothing fetched from elsewhere: it works air-gapped. A link to /metrics.
pub fn index(m: &Metrics, pictures: Result<Drawings, &str>) -> String {
    let mut page = String::from(
        "<!DOCTYPE html>\n<html><head><title>iostack-exporter</title></head><body>\n\
         <h1>iostack-exporter</h1>\n<p><a href=\"/metrics\">/metrics</a></p>\n",
    );
    let pictures = match pictures {
        Ok(pictures) => pictures,
        Err(why) => {
            page.push_str(&format!("<p>{}</p>\n", html_escape(why)));
            Drawings::default()
        }
    };
    let seconds = super::layers::HEATMAP_COLUMNS;
    if let Some(breakdown) = &pictures.breakdown {
        page.push_str(&format!(
            "<h2>Where the I/O calls' time went (the last {seconds} seconds)</h2>\n"
        ));
        page.push_str(&picture("breakdown", breakdown.svg()));
    }
    page.push_str(&requests_table(m));
    page.push_str(&readahead_table(m));
    page.push_str(
        "<h2>Lost events</h2>\n<table>\n<tr><th>layer</th><th>reason</th><th>count</th></tr>\n",
    );
    for ((layer, reason), n) in &m.lost {
        page.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{n}</td></tr>\n",
            html_escape(layer),
            html_escape(reason)
        ));
    }
    page.push_str("</table>\n");
    if !pictures.heatmaps.is_empty() {
        page.push_str(&format!(
            "<h2>Heat maps (the last {seconds} seconds)</h2>\n"
        ));
    }
    for (family, map) in &pictures.heatmaps {
        page.push_str(&picture(family, map.svg()));
    }
    page.push_str("<h2>Layers</h2>\n");
    for (layer, state) in &m.layers {
        page.push_str(&format!(
            "<h3>{} &mdash; {}</h3>\n<pre>{}</pre>\n",
            html_escape(layer),
            state.status(),
            html_escape(&state.detail)
        ));
    }
    page.push_str("</body></html>\n");
    page
}

/// A picture in a block of its own (`/#ID` goes to it).
fn picture(id: &str, svg: Result<String>) -> String {
    match svg {
        Ok(svg) => format!("<div id=\"{id}\">{svg}</div>\n"),
        Err(e) => format!("<p>{}</p>\n", html_escape(&format!("{e:#}"))),
    }
}

/// The readahead layer's pages since the exporter started, and the share wasted.
/// The io_uring and native AIO requests since the exporter started, a row per interface and
/// operation that had any: how many, handed to a worker, their block I/O, their mean time, and
/// its shares along their time line (the parts of iostack_request_seconds_total).
fn requests_table(m: &Metrics) -> String {
    use super::breakdown::{REQUESTS_PUNTED, REQUESTS_TOTAL, REQUEST_IOS, REQUEST_SECONDS};
    let family = |name: &str| m.counters.iter().find(|f| f.name == name);
    let Some(total) = family(REQUESTS_TOTAL.0) else {
        return String::new();
    };
    let of = |name: &str, labels: &super::series::Labels| {
        family(name).map_or(0, |f| f.series.get(labels).copied().unwrap_or(0))
    };
    const PARTS: [(&str, &str); 6] = [
        ("worker_wait", "waiting for a worker"),
        ("to_device", "to the device"),
        ("device", "on the device"),
        ("between_io", "between block I/Os"),
        ("after_io", "after the last block I/O"),
        ("no_io", "with no block I/O"),
    ];
    let mut page = String::from(
        "<h2>io_uring and AIO requests (since the exporter started)</h2>\n<table>\n\
         <tr><th>interface</th><th>op</th><th>requests</th><th>handed to a worker</th>\
         <th>block I/Os</th><th>mean</th><th>of their time</th></tr>\n",
    );
    let mut rows = 0;
    for (labels, &n) in &total.series {
        if n == 0 {
            continue;
        }
        rows += 1;
        let label = |k: &str| {
            labels
                .iter()
                .find(|(key, _)| *key == k)
                .map_or(String::new(), |(_, v)| html_escape(v))
        };
        let part_ns = |part: &str| {
            let mut l = labels.clone();
            l.push(("part", part.to_string()));
            of(REQUEST_SECONDS.0, &l)
        };
        let sum: u64 = PARTS.iter().map(|(p, _)| part_ns(p)).sum();
        let shares: Vec<String> = PARTS
            .iter()
            .filter(|(p, _)| part_ns(p) > 0)
            .map(|(p, text)| format!("{text} {:.1}%", part_ns(p) as f64 * 100.0 / sum as f64))
            .collect();
        page.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{n}</td><td>{}</td><td>{}</td><td>{:.3} ms</td><td>{}</td></tr>\n",
            label("interface"),
            label("op"),
            of(REQUESTS_PUNTED.0, labels),
            of(REQUEST_IOS.0, labels),
            sum as f64 / n as f64 / 1e6,
            shares.join(", ")
        ));
    }
    if rows == 0 {
        page.push_str("<tr><td colspan=\"7\">none yet</td></tr>\n");
    }
    page.push_str("</table>\n");
    page
}

fn readahead_table(m: &Metrics) -> String {
    let Some(pages) = m
        .counters
        .iter()
        .find(|f| f.name == super::readahead::PAGES.0)
    else {
        return String::new();
    };
    let of = |state: &str| {
        pages
            .series
            .iter()
            .filter(|(labels, _)| labels.iter().any(|(k, v)| *k == "state" && v == state))
            .map(|(_, n)| *n)
            .sum::<u64>()
    };
    let (brought, used, wasted) = (of("brought_in"), of("used"), of("evicted_unused"));
    let share = match brought {
        0 => "-".to_string(),
        b => format!("{:.1}%", wasted as f64 * 100.0 / b as f64),
    };
    format!(
        "<h2>Readahead (since the exporter started)</h2>\n<table>\n\
         <tr><th>pages brought in</th><th>used</th><th>evicted unused</th><th>wasted</th></tr>\n\
         <tr><td>{brought}</td><td>{used}</td><td>{wasted}</td><td>{share}</td></tr>\n</table>\n"
    )
}
