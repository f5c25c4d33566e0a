//! A real Prometheus (Debian's, which scripts/install-deps unpacks into the cache) and its
//! promtool, for the exporter's and the rules' tests.

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::Duration;

use super::{free_port, http_get};

/// Debian's Prometheus and promtool, which scripts/install-deps unpacks into the cache.
pub fn prometheus_bin(name: &str) -> String {
    let cache = std::env::var("IOSTACK_CACHE").unwrap_or_else(|_| "/var/cache/iostack".into());
    let path = format!("{cache}/prometheus/usr/bin/{name}");
    assert!(
        Path::new(&path).exists(),
        "{path} is missing: run scripts/install-deps"
    );
    path
}

/// promtool with `args`, run to its end.
pub fn promtool(args: &[&str]) -> Output {
    Command::new(prometheus_bin("promtool"))
        .args(args)
        .output()
        .expect("run promtool")
}

/// Every byte but letters and digits as %XX: a PromQL expression in a query string.
pub fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A real Prometheus on 127.0.0.1 scraping the exporter at `target` every second, its storage
/// in a temporary directory; killed and removed on drop.
pub struct Prometheus {
    child: Child,
    dir: PathBuf,
    port: u16,
}

/// An alert as Prometheus' /api/v1/alerts shows it.
#[derive(Debug)]
pub struct Alert {
    pub labels: BTreeMap<String, String>,
    /// `pending` or `firing`.
    pub state: String,
}

impl Prometheus {
    pub fn start(target: u16) -> Prometheus {
        Prometheus::start_with_rules(target, None)
    }

    /// The same, evaluating the rules of `rules` every second.
    pub fn start_with_rules(target: u16, rules: Option<&Path>) -> Prometheus {
        let dir = std::env::temp_dir().join(format!("iostack-prometheus-{target}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("prometheus.yml");
        let rule_files = rules.map_or(String::new(), |r| {
            format!("rule_files:\n  - {}\n", r.display())
        });
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n{rule_files}scrape_configs:\n  - job_name: iostack\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let log = std::fs::File::create(dir.join("log")).unwrap();
        let child = Command::new(prometheus_bin("prometheus"))
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start prometheus");
        let prometheus = Prometheus { child, dir, port };
        // Ready, and has scraped the exporter once.
        for _ in 0..300 {
            if prometheus.value("up{job=\"iostack\"}") == Some(1.0) {
                return prometheus;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "Prometheus never scraped the exporter: {}",
            std::fs::read_to_string(prometheus.dir.join("log")).unwrap_or_default()
        );
    }

    fn get(&self, path: &str) -> Option<serde_json::Value> {
        // Not listening yet: nothing.
        TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        serde_json::from_str(&http_get(self.port, path)).ok()
    }

    /// The one value an instant query gives, if it gives exactly one.
    pub fn value(&self, promql: &str) -> Option<f64> {
        let reply = self.get(&format!("/api/v1/query?query={}", url_encode(promql)))?;
        match reply["data"]["result"].as_array()?.as_slice() {
            [one] => one["value"][1].as_str()?.parse().ok(),
            _ => None,
        }
    }

    /// An instant query's results, by the value of `label`.
    pub fn by(&self, promql: &str, label: &str) -> BTreeMap<String, f64> {
        let reply = self
            .get(&format!("/api/v1/query?query={}", url_encode(promql)))
            .unwrap_or_else(|| panic!("{promql}: no reply"));
        reply["data"]["result"]
            .as_array()
            .unwrap_or_else(|| panic!("{promql}: {reply}"))
            .iter()
            .map(|r| {
                let key = r["metric"][label].as_str().unwrap_or_default().to_string();
                let value = r["value"][1].as_str().unwrap().parse().unwrap();
                (key, value)
            })
            .collect()
    }

    /// The alerts pending or firing now.
    pub fn alerts(&self) -> Vec<Alert> {
        let reply = self.get("/api/v1/alerts").expect("Prometheus' alerts");
        reply["data"]["alerts"]
            .as_array()
            .unwrap_or_else(|| panic!("no alerts array: {reply}"))
            .iter()
            .map(|a| Alert {
                labels: a["labels"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect(),
                state: a["state"].as_str().unwrap_or_default().to_string(),
            })
            .collect()
    }

    /// Its log so far (for a failure's message).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("log")).unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
