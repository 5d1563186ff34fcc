//! What a bridge connects to and what it publishes or subscribes to.

use crate::graph::{check_name, NameError, Qos, Reliability};
use std::time::Duration;

/// How the bridge's Zenoh session joins the network.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Mode {
    /// A peer: connects to other peers and routers directly (Zenoh's and rmw_zenoh's default).
    Peer,
    /// A client: everything goes through the router(s) it connects to.
    Client,
}

/// Whether a publisher waits or drops a message when the link is congested.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Congestion {
    /// Wait until the message can be sent (Zenoh closes a link blocked for longer than its
    /// `queue/congestion_control/block/wait_before_close`). The bridge's mailbox then drops
    /// the frames that arrive meanwhile, counted, and keeps the newest: the camera never waits.
    Block,
    /// Drop the message in Zenoh when its queue is full (rmw_zenoh's choice for keep-last
    /// publishers); such drops are not counted by the bridge.
    Drop,
}

/// How a frame's capture time becomes `header.stamp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StampClock {
    /// The capture time is CLOCK_MONOTONIC (the stream's default): the stamp is it plus the
    /// current offset of CLOCK_REALTIME from CLOCK_MONOTONIC, the system time ROS expects.
    Monotonic,
    /// The capture time is already on the clock the stamp should use (the producer set it,
    /// for example in nanoseconds since the Unix epoch): the stamp is it, unchanged. The
    /// receiving bridge then sets the local frame's capture time to the stamp, unchanged.
    AsIs,
}

/// How a frame's rows become the image's `data` and `step` (`sensor_msgs/msg/Image`: `step` is
/// the full row length in bytes, which may exceed a row of pixels).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rows {
    /// `step` is the frame's pitch: the rows as the frame stores them, padding included (a
    /// 1920-pixel NV12 row of the mock's frames is 2048 bytes). A CPU frame's pixels are then
    /// published straight from its mapping, without a copy; a CUDA frame's are copied device ->
    /// host once, straight into the message. Frames whose planes have different pitches, and
    /// block-linear frames (which have no rows of bytes), are published [`Packed`](Self::Packed).
    Stored,
    /// `step` is one row of pixels (`width` bytes for `nv12`, `4 * width` for `rgba8`), for
    /// receivers that ignore `step`. Where the frame's pitch is wider, a CPU frame's message is
    /// still its mapping, one slice per row (each row's first `step` bytes; no copy), and a
    /// CUDA frame's rows are packed by the device -> host copy itself.
    Packed,
}

/// A bridge's configuration. Start from [`BridgeConfig::new`] (the topic) and change what
/// differs; the fields are public to read, and new ones may come (`#[non_exhaustive]`).
///
/// The defaults work between two machines on one network: a Zenoh peer that listens on every
/// interface on a port the system picks and finds its peers by multicast scouting, domain 0,
/// best-effort keep-last 1 (a camera's newest frame), blocking congestion control, each frame's
/// rows as it stores them ([`Rows::Stored`]).
///
/// ```
/// use nvsci_zenoh::{BridgeConfig, Mode};
/// let c = BridgeConfig::new("/camera/image_raw")
///     .mode(Mode::Peer)
///     .connect("tcp/192.168.1.10:7447")
///     .domain(3)
///     .reliable();
/// assert_eq!(c.key_expr(), format!("3/camera/image_raw/{}/{}",
///     nvsci_zenoh::graph::IMAGE_TYPE_NAME, nvsci_zenoh::graph::IMAGE_TYPE_HASH));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BridgeConfig {
    /// Peer or client.
    pub mode: Mode,
    /// Zenoh endpoints to connect to (`tcp/host:port`), such as the router of a ROS 2 machine
    /// (`rmw_zenohd` listens on `tcp/[::]:7447`).
    pub connect: Vec<String>,
    /// Zenoh endpoints to listen on (empty: Zenoh's default for the mode, a peer on
    /// `tcp/[::]:0`).
    pub listen: Vec<String>,
    /// Whether to find peers and routers by UDP multicast scouting (Zenoh's default: on).
    pub multicast_scouting: bool,
    /// The ROS domain id (0 to 232; `ROS_DOMAIN_ID`).
    pub domain: u32,
    /// The fully qualified topic name.
    pub topic: String,
    /// The node the bridge appears as on the ROS graph.
    pub node: String,
    /// The node's namespace (`/` for the root).
    pub namespace: String,
    /// The node's security enclave (`/`).
    pub enclave: String,
    /// `header.frame_id` of the published images.
    pub frame_id: String,
    /// Best effort or reliable.
    pub reliability: Reliability,
    /// Keep-last depth announced in the tokens.
    pub depth: u32,
    /// Block or drop on congestion (publishing side).
    pub congestion: Congestion,
    /// How capture times become stamps and back.
    pub stamp_clock: StampClock,
    /// How long the bridge's thread waits for one frame or message before it looks whether it
    /// was asked to stop (default 50 ms).
    pub poll: Duration,
    /// How the bridge consumer lays a frame's rows out in its messages (default
    /// [`Rows::Stored`]).
    pub rows: Rows,
}

/// A configuration that cannot work: what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A ROS name is not valid.
    #[error(transparent)]
    Name(#[from] NameError),
    /// The domain id is above 232 (ROS 2's limit).
    #[error("domain id {0} is above 232")]
    Domain(u32),
    /// A keep-last depth of 0.
    #[error("a keep-last depth of 0")]
    Depth,
    /// A frame id containing a NUL (CDR strings end at the first NUL).
    #[error("frame_id contains a NUL byte")]
    FrameId,
    /// A poll interval of zero.
    #[error("a poll interval of zero")]
    Poll,
    /// Zenoh refused the session configuration (an endpoint it cannot parse, ...).
    #[error("Zenoh configuration `{key}`: {reason}")]
    Zenoh {
        /// The configuration key.
        key: &'static str,
        /// Zenoh's reason.
        reason: String,
    },
}

impl BridgeConfig {
    /// The defaults ([`BridgeConfig`]) for `topic` (fully qualified, `/camera/image_raw`).
    pub fn new(topic: impl Into<String>) -> Self {
        Self {
            mode: Mode::Peer,
            connect: Vec::new(),
            listen: Vec::new(),
            multicast_scouting: true,
            domain: 0,
            topic: topic.into(),
            node: "nvsci_bridge".into(),
            namespace: "/".into(),
            enclave: "/".into(),
            frame_id: String::new(),
            reliability: Reliability::BestEffort,
            depth: 1,
            congestion: Congestion::Block,
            stamp_clock: StampClock::Monotonic,
            poll: Duration::from_millis(50),
            rows: Rows::Stored,
        }
    }

    /// Peer or client.
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }
    /// Adds an endpoint to connect to (`tcp/host:port`).
    pub fn connect(mut self, endpoint: impl Into<String>) -> Self {
        self.connect.push(endpoint.into());
        self
    }
    /// Adds an endpoint to listen on (`tcp/0.0.0.0:7448`).
    pub fn listen(mut self, endpoint: impl Into<String>) -> Self {
        self.listen.push(endpoint.into());
        self
    }
    /// Multicast scouting on or off (off: only the endpoints given are used).
    pub fn multicast_scouting(mut self, on: bool) -> Self {
        self.multicast_scouting = on;
        self
    }
    /// The ROS domain id.
    pub fn domain(mut self, domain: u32) -> Self {
        self.domain = domain;
        self
    }
    /// The node name, and its namespace.
    pub fn node(mut self, namespace: impl Into<String>, node: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self.node = node.into();
        self
    }
    /// `header.frame_id` of the published images.
    pub fn frame_id(mut self, frame_id: impl Into<String>) -> Self {
        self.frame_id = frame_id.into();
        self
    }
    /// Reliable delivery.
    pub fn reliable(mut self) -> Self {
        self.reliability = Reliability::Reliable;
        self
    }
    /// Best-effort delivery (the default).
    pub fn best_effort(mut self) -> Self {
        self.reliability = Reliability::BestEffort;
        self
    }
    /// The keep-last depth announced.
    pub fn depth(mut self, depth: u32) -> Self {
        self.depth = depth;
        self
    }
    /// Block or drop on congestion.
    pub fn congestion(mut self, congestion: Congestion) -> Self {
        self.congestion = congestion;
        self
    }
    /// How capture times become stamps.
    pub fn stamp_clock(mut self, clock: StampClock) -> Self {
        self.stamp_clock = clock;
        self
    }
    /// How long the bridge's thread waits before it looks whether it should stop.
    pub fn poll(mut self, poll: Duration) -> Self {
        self.poll = poll;
        self
    }

    /// How the bridge consumer lays a frame's rows out in its messages.
    pub fn rows(mut self, rows: Rows) -> Self {
        self.rows = rows;
        self
    }

    /// The key expression of the topic's messages.
    pub fn key_expr(&self) -> String {
        crate::graph::topic_key_expr(self.domain, &self.topic)
    }

    /// The QoS announced in the tokens.
    pub fn qos(&self) -> Qos {
        Qos { reliability: self.reliability, depth: self.depth }
    }

    /// Checks every field; the first problem found.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_name("topic", &self.topic, false)?;
        check_name("namespace", &self.namespace, true)?;
        check_name("enclave", &self.enclave, true)?;
        if self.node.contains('/') {
            let problem = crate::graph::NameProblem::Character;
            return Err(NameError { field: "node", name: self.node.clone(), problem }.into());
        }
        check_name("node", &format!("/{}", self.node), false)
            .map_err(|e| NameError { name: self.node.clone(), ..e })?;
        if self.domain > 232 {
            return Err(ConfigError::Domain(self.domain));
        }
        if self.depth == 0 {
            return Err(ConfigError::Depth);
        }
        if self.frame_id.contains('\0') {
            return Err(ConfigError::FrameId);
        }
        if self.poll.is_zero() {
            return Err(ConfigError::Poll);
        }
        Ok(())
    }

    /// The Zenoh session configuration.
    pub fn zenoh_config(&self) -> Result<zenoh::Config, ConfigError> {
        self.validate()?;
        let mut c = zenoh::Config::default();
        let mut set = |key: &'static str, value: String| {
            c.insert_json5(key, &value).map_err(|e| ConfigError::Zenoh { key, reason: e.to_string() })
        };
        let json_list = |v: &[String]| {
            let items: Vec<String> = v.iter().map(|e| format!("{e:?}")).collect();
            format!("[{}]", items.join(","))
        };
        set(
            "mode",
            match self.mode {
                Mode::Peer => "\"peer\"".into(),
                Mode::Client => "\"client\"".into(),
            },
        )?;
        set("connect/endpoints", json_list(&self.connect))?;
        if !self.listen.is_empty() {
            set("listen/endpoints", json_list(&self.listen))?;
        }
        set("scouting/multicast/enabled", self.multicast_scouting.to_string())?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::NameProblem;

    #[test]
    fn defaults() {
        let c = BridgeConfig::new("/camera/image_raw");
        assert_eq!(c.mode, Mode::Peer);
        assert!(c.multicast_scouting);
        assert_eq!((c.domain, c.depth, c.reliability), (0, 1, Reliability::BestEffort));
        assert_eq!(c.rows, Rows::Stored);
        assert_eq!(c.validate(), Ok(()));
        assert!(c.zenoh_config().is_ok());
    }

    #[test]
    fn bad_fields_are_named() {
        let c = BridgeConfig::new("camera");
        assert!(matches!(
            c.validate(),
            Err(ConfigError::Name(NameError { field: "topic", problem: NameProblem::NotQualified, .. }))
        ));
        let c = BridgeConfig::new("/c").node("/", "a/b");
        assert!(matches!(
            c.validate(),
            Err(ConfigError::Name(NameError { field: "node", problem: NameProblem::Character, ref name })) if name == "a/b"
        ));
        assert_eq!(BridgeConfig::new("/c").domain(233).validate(), Err(ConfigError::Domain(233)));
        assert_eq!(BridgeConfig::new("/c").depth(0).validate(), Err(ConfigError::Depth));
        assert_eq!(BridgeConfig::new("/c").frame_id("a\0b").validate(), Err(ConfigError::FrameId));
        assert_eq!(BridgeConfig::new("/c").poll(Duration::ZERO).validate(), Err(ConfigError::Poll));
        assert!(matches!(
            BridgeConfig::new("/c").connect("nonsense").zenoh_config(),
            Err(ConfigError::Zenoh { key: "connect/endpoints", .. })
        ));
    }
}
