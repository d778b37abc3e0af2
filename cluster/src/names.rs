//! Names for the entities of the fleet's alerts, from the sensors that saw them.
//!
//! A detector's alert carries its entities' UUIDs, not their names (the records that cross
//! the stream hold hashes); on a stand-alone node the store fills the names in from its
//! entity table when it shows the alert. A console has no events, so it asks the alert's
//! sensor (`GET /api/v1/entities/{uuid}/timeline?limit=1`, with a deadline) once per entity
//! and keeps the answer. A sensor that does not answer leaves the name empty; the alert is
//! stored all the same.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use watchpost_outbound::{HttpClient, Method, Trust};
use watchpost_proto::Alert;

/// How long a sensor has to answer.
const DEADLINE: Duration = Duration::from_secs(2);
/// Names kept; past it the cache starts over (names do not change, so this only costs asks).
const CACHE: usize = 100_000;

/// Where a sensor's API is reached (`http://host:port`), by its node name.
pub(crate) type ApiOf = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// See the module's documentation.
pub(crate) struct Namer {
    client: Option<HttpClient>,
    api_of: ApiOf,
    cache: Mutex<HashMap<watchpost_proto::Uuid, String>>,
}

impl Namer {
    pub(crate) fn new(api_of: ApiOf) -> Namer {
        let client = HttpClient::new(Trust::System {
            extra_ca_file: None,
        })
        .map_err(|e| tracing::warn!("cluster: console: no client for the sensors' APIs: {e}"))
        .ok();
        Namer {
            client,
            api_of,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// Fills in the names of `alert`'s entities that its sensor knows.
    pub(crate) async fn name(&self, alert: &mut Alert) {
        let sensor = alert.sensor.clone();
        for e in alert
            .entity
            .iter_mut()
            .chain(alert.related_entities.iter_mut())
        {
            if !e.value.is_empty() {
                continue;
            }
            if let Some(name) = self.cached(&e.uuid) {
                e.value = name;
                continue;
            }
            if let Some(name) = self.ask(&sensor, &e.uuid).await {
                let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
                if cache.len() >= CACHE {
                    cache.clear();
                }
                cache.insert(e.uuid, name.clone());
                e.value = name;
            }
        }
    }

    fn cached(&self, uuid: &watchpost_proto::Uuid) -> Option<String> {
        self.cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(uuid)
            .cloned()
    }

    async fn ask(&self, sensor: &str, uuid: &watchpost_proto::Uuid) -> Option<String> {
        let client = self.client.as_ref()?;
        let api = (self.api_of)(sensor)?;
        let url = format!("{api}/api/v1/entities/{uuid}/timeline?limit=1");
        let reply = client
            // Answered from the sensor's own store even where the sensor is a console too.
            .send(
                Method::GET,
                &url,
                &[("x-watchpost-local", "1")],
                None,
                DEADLINE,
            )
            .await
            .map_err(|e| tracing::debug!("cluster: console: {sensor} did not name {uuid}: {e}"))
            .ok()?;
        if reply.status != 200 {
            return None;
        }
        let answer: serde_json::Value = serde_json::from_slice(&reply.body).ok()?;
        answer["entity"]["value"].as_str().map(str::to_string)
    }
}
