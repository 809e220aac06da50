//! metrics: counters and latency histograms, written out in the Prometheus
//! text format (version 0.0.4) for `GET /metrics`.
//!
//! Small on purpose: fixed buckets, atomics on the hot path, one mutex per
//! new label set. Every label has a bounded set of values, whatever clients
//! send: routes are matched templates (or `unmatched`), methods are the
//! standard ones (or `other`, see [`method_label`]), statuses are numbers.
//! A maintained metrics crate (`metrics` with its Prometheus exporter) would
//! not bound labels any better: it records whatever label values it is
//! handed, so the bound has to be made here either way.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds, in seconds, of the latency buckets: 0.5 ms to 10 s.
pub const LATENCY_BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A latency histogram over [`LATENCY_BUCKETS`].
#[derive(Debug, Default)]
pub struct Histogram {
    /// Per bucket (not cumulative); the last one is `+Inf`.
    counts: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    /// Sum of observations, in nanoseconds.
    sum_nanos: AtomicU64,
}

impl Histogram {
    /// Counts one observation.
    pub fn observe(&self, elapsed: Duration) {
        let seconds = elapsed.as_secs_f64();
        let bucket = LATENCY_BUCKETS
            .iter()
            .position(|bound| seconds <= *bound)
            .unwrap_or(LATENCY_BUCKETS.len());
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Observations so far.
    pub fn count(&self) -> u64 {
        self.counts
            .iter()
            .map(|count| count.load(Ordering::Relaxed))
            .sum()
    }

    /// Writes `name_bucket`, `name_sum` and `name_count` lines with `labels`
    /// (already formatted, `key="value"` pairs joined by commas, or empty).
    pub fn write(&self, out: &mut String, name: &str, labels: &str) {
        let separator = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0u64;
        for (index, count) in self.counts.iter().enumerate() {
            cumulative += count.load(Ordering::Relaxed);
            let bound = LATENCY_BUCKETS
                .get(index)
                .map_or_else(|| "+Inf".to_string(), |bound| bound.to_string());
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels}{separator}le=\"{bound}\"}} {cumulative}"
            );
        }
        let braces = if labels.is_empty() {
            String::new()
        } else {
            format!("{{{labels}}}")
        };
        let sum = self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{name}_sum{braces} {sum}");
        let _ = writeln!(out, "{name}_count{braces} {cumulative}");
    }
}

/// The methods counted under their own name; any other is counted as
/// `other`, so a client cannot grow the label set by inventing methods.
const KNOWN_METHODS: [&str; 9] = [
    "GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "CONNECT", "TRACE",
];

/// The `method` label of a request method: the method itself when it is a
/// standard one, else `other`.
pub fn method_label(method: &str) -> &'static str {
    KNOWN_METHODS
        .iter()
        .find(|known| **known == method)
        .copied()
        .unwrap_or("other")
}

/// Route template, method label, status.
type SeriesKey = (String, &'static str, u16);

/// Requests by route template, method and status, with their latency.
#[derive(Debug, Default)]
pub struct HttpMetrics {
    /// Keyed by route template, method label and status. A std `Mutex`:
    /// held only to find or insert an entry, never across an await.
    series: Mutex<BTreeMap<SeriesKey, std::sync::Arc<Histogram>>>,
}

impl HttpMetrics {
    /// Counts one answered request. `method` is recorded through
    /// [`method_label`].
    pub fn observe(&self, route: &str, method: &str, status: u16, elapsed: Duration) {
        let histogram = {
            let Ok(mut series) = self.series.lock() else {
                return;
            };
            series
                .entry((route.to_string(), method_label(method), status))
                .or_default()
                .clone()
        };
        histogram.observe(elapsed);
    }

    /// Writes `precedent_http_requests_total` and
    /// `precedent_http_request_duration_seconds`.
    pub fn write(&self, out: &mut String) {
        let series: Vec<_> = match self.series.lock() {
            Ok(series) => series
                .iter()
                .map(|(key, histogram)| (key.clone(), histogram.clone()))
                .collect(),
            Err(_) => return,
        };
        out.push_str(
            "# HELP precedent_http_requests_total HTTP requests answered, by route template, method and status.\n\
             # TYPE precedent_http_requests_total counter\n",
        );
        for ((route, method, status), histogram) in &series {
            let _ = writeln!(
                out,
                "precedent_http_requests_total{{route=\"{}\",method=\"{}\",status=\"{status}\"}} {}",
                escape(route),
                escape(method),
                histogram.count()
            );
        }
        out.push_str(
            "# HELP precedent_http_request_duration_seconds Time to answer, by route template, method and status.\n\
             # TYPE precedent_http_request_duration_seconds histogram\n",
        );
        for ((route, method, status), histogram) in &series {
            let labels = format!(
                "route=\"{}\",method=\"{}\",status=\"{status}\"",
                escape(route),
                escape(method)
            );
            histogram.write(out, "precedent_http_request_duration_seconds", &labels);
        }
    }
}

/// Writes one gauge (or counter) with its help and type lines.
pub fn write_single(out: &mut String, name: &str, kind: &str, help: &str, value: f64) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
    );
}

/// Escapes a label value (backslash, quote, newline).
pub fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_and_end_at_the_count() {
        let histogram = Histogram::default();
        histogram.observe(Duration::from_micros(300));
        histogram.observe(Duration::from_millis(30));
        histogram.observe(Duration::from_secs(60));
        let mut out = String::new();
        histogram.write(&mut out, "x", "route=\"/a\"");
        assert!(out.contains("x_bucket{route=\"/a\",le=\"0.0005\"} 1\n"));
        assert!(out.contains("x_bucket{route=\"/a\",le=\"0.05\"} 2\n"));
        assert!(out.contains("x_bucket{route=\"/a\",le=\"10\"} 2\n"));
        assert!(out.contains("x_bucket{route=\"/a\",le=\"+Inf\"} 3\n"));
        assert!(out.contains("x_count{route=\"/a\"} 3\n"));
        assert!(out.contains("x_sum{route=\"/a\"} 60.0303"));
    }

    #[test]
    fn http_series_are_kept_per_route_method_and_status() {
        let metrics = HttpMetrics::default();
        metrics.observe("/v1/add", "POST", 200, Duration::from_millis(5));
        metrics.observe("/v1/add", "POST", 200, Duration::from_millis(7));
        metrics.observe("/v1/add", "POST", 422, Duration::from_millis(1));
        let mut out = String::new();
        metrics.write(&mut out);
        assert!(out.contains(
            "precedent_http_requests_total{route=\"/v1/add\",method=\"POST\",status=\"200\"} 2\n"
        ));
        assert!(out.contains(
            "precedent_http_requests_total{route=\"/v1/add\",method=\"POST\",status=\"422\"} 1\n"
        ));
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn invented_methods_share_one_other_label() {
        let metrics = HttpMetrics::default();
        for index in 0..1000 {
            let method = format!("X{index:04}{}", "Q".repeat(4000));
            metrics.observe("/health", &method, 405, Duration::from_millis(1));
        }
        metrics.observe("/health", "GET", 200, Duration::from_millis(1));
        let mut out = String::new();
        metrics.write(&mut out);
        assert!(out.contains(
            "precedent_http_requests_total{route=\"/health\",method=\"other\",status=\"405\"} 1000\n"
        ));
        assert!(out.contains("method=\"GET\""));
        assert!(out.len() < 16 * 1024, "{} bytes", out.len());
        assert_eq!(method_label("PATCH"), "PATCH");
        assert_eq!(method_label("get"), "other");
    }
}
