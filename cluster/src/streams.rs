//! The fleet's streams and buckets on JetStream: their names, and opening them (made by the
//! first node that finds them missing, replicated on up to three of the listed servers).

use crate::ClusterError;
use async_nats::jetstream::{self, kv, object_store, stream};
use std::time::Duration;
use watchpost_proto::config::ClusterConfig;

/// Detection records from sensors to detectors, one subject per partition.
pub const DETECT_STREAM: &str = "WP_DETECT";
/// Alerts (and signals) from detectors to consoles.
pub const ALERTS_STREAM: &str = "WP_ALERTS";
/// The subject of alerts.
pub const ALERTS_SUBJECT: &str = "wp.alerts";
/// Which detector owns which partition: one key per partition.
pub const LEASES_BUCKET: &str = "wp_leases";
/// Partition snapshots: one object per partition.
pub const STATE_BUCKET: &str = "wp_state";

/// How long a message id is remembered to drop a repeat: longer than a publisher's retries
/// through a server's loss (the default is two minutes).
const DUPLICATE_WINDOW: Duration = Duration::from_secs(5 * 60);

/// The subject of partition `p`'s records.
pub fn detect_subject(p: u32) -> String {
    format!("wp.detect.{p}")
}

/// The key (and snapshot object name) of partition `p`.
pub fn partition_key(p: u32) -> String {
    format!("p{p}")
}

pub(crate) fn replicas(config: &ClusterConfig) -> usize {
    config.servers.len().clamp(1, 3)
}

fn failed(what: &str) -> impl Fn(&dyn std::fmt::Display) -> ClusterError + '_ {
    move |e| ClusterError::Bucket {
        bucket: what.to_string(),
        reason: e.to_string(),
    }
}

/// The detection stream; refused when it was made with another partition count (its records
/// would reach the wrong owners).
pub(crate) async fn detect_stream(
    js: &jetstream::Context,
    config: &ClusterConfig,
) -> Result<stream::Stream, ClusterError> {
    let fail = failed(DETECT_STREAM);
    let partitions = config.partitions.to_string();
    let mut s = js
        .get_or_create_stream(stream::Config {
            name: DETECT_STREAM.into(),
            description: Some(
                "Watchpost: detection records from sensors, by partition (docs/cluster.md)".into(),
            ),
            subjects: vec!["wp.detect.*".into()],
            max_age: Duration::from_secs(config.stream_max_age_hours * 3600),
            duplicate_window: DUPLICATE_WINDOW,
            num_replicas: replicas(config),
            storage: stream::StorageType::File,
            metadata: [("partitions".to_string(), partitions.clone())].into(),
            ..Default::default()
        })
        .await
        .map_err(|e| fail(&e))?;
    let info = s.info().await.map_err(|e| fail(&e))?;
    match info.config.metadata.get("partitions") {
        Some(made) if *made != partitions => Err(ClusterError::Partitions {
            stream: made.clone(),
            configured: config.partitions,
        }),
        _ => Ok(s),
    }
}

/// The alerts stream.
pub(crate) async fn alerts_stream(
    js: &jetstream::Context,
    config: &ClusterConfig,
) -> Result<stream::Stream, ClusterError> {
    js.get_or_create_stream(stream::Config {
        name: ALERTS_STREAM.into(),
        description: Some("Watchpost: alerts and signals from detectors (docs/cluster.md)".into()),
        subjects: vec![ALERTS_SUBJECT.into()],
        // Consoles keep their own store; the stream holds what a console away for a week
        // catches up on.
        max_age: Duration::from_secs(7 * 86_400),
        duplicate_window: DUPLICATE_WINDOW,
        num_replicas: replicas(config),
        storage: stream::StorageType::File,
        ..Default::default()
    })
    .await
    .map_err(|e| failed(ALERTS_STREAM)(&e))
}

/// The partition leases: one value per key, gone `lease_seconds` after its last renewal.
pub(crate) async fn leases(
    js: &jetstream::Context,
    config: &ClusterConfig,
) -> Result<kv::Store, ClusterError> {
    key_value(
        js,
        kv::Config {
            bucket: LEASES_BUCKET.into(),
            description: "Watchpost: which detector owns each partition (docs/cluster.md)".into(),
            history: 1,
            max_age: Duration::from_secs(config.lease_seconds),
            num_replicas: replicas(config),
            storage: stream::StorageType::File,
            // A lease that lapses leaves a marker, which the detectors' watchers see as a purge.
            limit_markers: Some(Duration::from_secs(config.lease_seconds)),
            ..Default::default()
        },
    )
    .await
}

/// A key-value bucket: opened, or made when there is none.
pub(crate) async fn key_value(
    js: &jetstream::Context,
    config: kv::Config,
) -> Result<kv::Store, ClusterError> {
    let name = config.bucket.clone();
    if let Ok(store) = js.get_key_value(&name).await {
        return Ok(store);
    }
    match js.create_key_value(config).await {
        Ok(store) => Ok(store),
        // Another node made it meanwhile.
        Err(made) => js
            .get_key_value(&name)
            .await
            .map_err(|_| ClusterError::Bucket {
                bucket: name,
                reason: made.to_string(),
            }),
    }
}

/// The snapshots' object store.
pub(crate) async fn state_store(
    js: &jetstream::Context,
    config: &ClusterConfig,
) -> Result<object_store::ObjectStore, ClusterError> {
    object_store_named(
        js,
        config,
        STATE_BUCKET,
        "Watchpost: partition snapshots (docs/cluster.md)",
    )
    .await
}

/// An object store with every server's copy, read through its leader: opened, or made when
/// there is none.
pub(crate) async fn object_store_named(
    js: &jetstream::Context,
    config: &ClusterConfig,
    bucket: &'static str,
    description: &str,
) -> Result<object_store::ObjectStore, ClusterError> {
    if js.get_object_store(bucket).await.is_err() {
        let made = js
            .create_object_store(object_store::Config {
                bucket: bucket.into(),
                description: Some(description.into()),
                num_replicas: replicas(config),
                storage: stream::StorageType::File,
                ..Default::default()
            })
            .await;
        // Another node may have made it meanwhile: opened below either way.
        if let Err(made) = made
            && js.get_object_store(bucket).await.is_err()
        {
            return Err(failed(bucket)(&made));
        }
    }
    read_through_leader(js, bucket).await?;
    js.get_object_store(bucket)
        .await
        .map_err(|e| failed(bucket)(&e))
}

/// Turns off direct reads of an object store's stream (the client makes them with direct
/// reads on): a direct read may be answered by any replica, and one still catching up after
/// its server's restart answers "not found" for an object the stream holds. Seen in the fleet
/// test: a detector taking a partition back after two servers returned was told its snapshot
/// did not exist and started the partition over from its first record. Objects are read
/// rarely (a partition taken, an indicator file changed), so every read going to the leader
/// costs nothing that matters. Done by whichever node opens the store first; a stream already
/// set is left alone.
async fn read_through_leader(js: &jetstream::Context, bucket: &str) -> Result<(), ClusterError> {
    let name = format!("OBJ_{bucket}");
    // Opening the stream reads its configuration: no second request for it.
    let stream = js.get_stream(&name).await.map_err(|e| failed(&name)(&e))?;
    let config = &stream.cached_info().config;
    if !config.allow_direct {
        return Ok(());
    }
    let mut leader_only = config.clone();
    leader_only.allow_direct = false;
    js.update_stream(leader_only)
        .await
        .map(|_| ())
        .map_err(|e| failed(&name)(&e))
}

/// Publishes one message to `subject`, built afresh by `message` for each try, until the
/// stream acknowledges it: for what is rare and must not be lost (an alert, a verdict). Each
/// failure is counted in `counters.publish_failures` and logged naming `what`.
pub(crate) async fn publish_until_acked(
    js: &jetstream::Context,
    subject: String,
    message: impl Fn() -> jetstream::message::PublishMessage,
    counters: &crate::FleetCounters,
    what: &str,
) {
    loop {
        let acked = match js.send_publish(subject.clone(), message()).await {
            Ok(future) => future.await.map(|_| ()).map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match acked {
            Ok(()) => return,
            Err(e) => {
                crate::FleetCounters::add(&counters.publish_failures, 1);
                tracing::warn!("cluster: {what} not acknowledged ({e}); again in 1 s");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
