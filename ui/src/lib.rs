//! The dashboard's files, embedded into the binary at compile time.
//!
//! The dashboard is a thin client over the public API and the WebSocket stream (the spec: "there
//! is no private API"), written as plain ES modules under `ui/app/` with no build step (one
//! vendored libraries, uPlot for charts and Cytoscape.js for the entity graph): the binary needs no Node toolchain to build, a clean
//! clone builds without network access, and the content-security policy can be
//! `script-src 'self'` with no hashes or nonces to keep in step. `docs/dashboard.md` has the
//! reasons and the policy.
//!
//! Every file under `ui/app/` must be listed in [`ASSETS`] (a test checks both directions), so
//! nothing ships by accident and nothing listed is missing.
#![deny(missing_docs)]

/// One embedded file.
#[derive(Debug)]
pub struct Asset {
    /// File name under `ui/app/`, as requested (`app.js`).
    pub name: &'static str,
    /// `Content-Type` it is served with.
    pub content_type: &'static str,
    /// Its bytes.
    pub body: &'static [u8],
    /// [`Asset::etag`], once computed.
    etag: std::sync::OnceLock<u64>,
}

impl Asset {
    /// A hash of `body` (64-bit FNV-1a), the entity tag browsers revalidate with. Computed at the
    /// first request, not at compile time: the compiler's evaluator gives up on the vendored
    /// graph library (430 KB) and would take seconds of every build on the rest.
    pub fn etag(&self) -> u64 {
        *self.etag.get_or_init(|| fnv1a(self.body))
    }
}

/// FNV-1a.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

macro_rules! asset {
    ($name:literal, $content_type:literal) => {
        Asset {
            name: $name,
            content_type: $content_type,
            body: include_bytes!(concat!("../app/", $name)),
            etag: std::sync::OnceLock::new(),
        }
    };
}

/// The page served at `/`.
pub const INDEX: &str = "index.html";

/// Every file of the dashboard.
pub static ASSETS: [Asset; 23] = [
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("favicon.svg", "image/svg+xml"),
    asset!("app.js", "text/javascript; charset=utf-8"),
    asset!("attack.js", "text/javascript; charset=utf-8"),
    asset!("exceptions.js", "text/javascript; charset=utf-8"),
    asset!("signals.js", "text/javascript; charset=utf-8"),
    asset!("fleet.js", "text/javascript; charset=utf-8"),
    asset!("api.js", "text/javascript; charset=utf-8"),
    asset!("dom.js", "text/javascript; charset=utf-8"),
    asset!("format.js", "text/javascript; charset=utf-8"),
    asset!("assist.js", "text/javascript; charset=utf-8"),
    asset!("stream.js", "text/javascript; charset=utf-8"),
    asset!("alerts.js", "text/javascript; charset=utf-8"),
    asset!("events.js", "text/javascript; charset=utf-8"),
    asset!("status.js", "text/javascript; charset=utf-8"),
    asset!("rules.js", "text/javascript; charset=utf-8"),
    asset!("timeline.js", "text/javascript; charset=utf-8"),
    asset!("entities.js", "text/javascript; charset=utf-8"),
    asset!("layout.js", "text/javascript; charset=utf-8"),
    asset!("cytoscape.js", "text/javascript; charset=utf-8"),
    // uPlot 1.6.32 (MIT, its licence at the head of the file), for the dashboard's series.
    asset!("uplot.js", "text/javascript; charset=utf-8"),
    asset!("uplot.css", "text/css; charset=utf-8"),
];

/// The asset called `name` (a bare file name: no directories).
pub fn asset(name: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.name == name)
}

#[cfg(test)]
mod tests;
