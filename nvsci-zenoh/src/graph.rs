//! Names on the ROS 2 graph as rmw_zenoh writes them: a topic's key expression, the liveliness
//! tokens of a node and of its publishers and subscriptions, their QoS field and GID.
//!
//! From ros2/rmw_zenoh `docs/design.md` and `rmw_zenoh_cpp/src/detail/liveliness_utils.cpp`
//! (Kilted 0.6, Rolling) and `qos.cpp`:
//!
//! * data: `<domain>/<topic without its leading and trailing '/'>/<type name>/<type hash>`;
//! * node: `@ros2_lv/<domain>/<zid>/<nid>/<nid>/NN/<enclave>/<namespace>/<node>`;
//! * publisher (`MP`) or subscription (`MS`):
//!   `@ros2_lv/<domain>/<zid>/<nid>/<id>/MP/<enclave>/<namespace>/<node>/<topic>/<type name>/<type hash>/<qos>`,
//!   every `/` inside a name replaced by `%` (so the root namespace and enclave `/` are `%`);
//! * QoS: `<reliability>:<durability>:<history>,<depth>:<deadline s>,<ns>:<lifespan s>,<ns>:<liveliness>,<lease s>,<ns>`,
//!   each value empty where it equals rmw_zenoh's default (reliable, volatile, keep-last, depth
//!   42, infinite deadline, lifespan and lease, automatic liveliness);
//! * GID: XXH3-128 of the entity's token, its low 64 bits then its high 64 bits, each
//!   little-endian.

/// The DDS type name of `sensor_msgs/msg/Image`, as rmw_zenoh puts it in key expressions.
pub const IMAGE_TYPE_NAME: &str = "sensor_msgs::msg::dds_::Image_";

/// The type hash (REP 2011, RIHS01) of `sensor_msgs/msg/Image` in Kilted, Jazzy and Rolling
/// (the message and the types it uses have not changed between them).
pub const IMAGE_TYPE_HASH: &str = "RIHS01_d31d41a9a4c4bc8eae9be757b0beed306564f7526c88ea6a4588fb9582527d47";

/// The key expression prefix of rmw_zenoh's liveliness tokens.
pub const ADMIN_SPACE: &str = "@ros2_lv";

/// A ROS name that rmw_zenoh cannot put in a key expression.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} `{name}`: {problem}")]
pub struct NameError {
    /// Which name (`topic`, `node`, `namespace`, `enclave`).
    pub field: &'static str,
    /// The name given.
    pub name: String,
    /// What is wrong with it.
    pub problem: NameProblem,
}

/// What is wrong with a name ([`NameError`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NameProblem {
    /// `/` where a name is needed (a topic or a node name).
    #[error("the root is not a name here")]
    Root,
    /// It does not start with `/`.
    #[error("not fully qualified (it must start with '/')")]
    NotQualified,
    /// `//`, or a trailing `/`.
    #[error("an empty token ('//' or a trailing '/')")]
    EmptyToken,
    /// A character other than ASCII letters, digits, `_` and `/`.
    #[error("only letters, digits, '_' and '/' are allowed")]
    Character,
    /// A token starting with a digit.
    #[error("a token starts with a digit")]
    LeadingDigit,
}

/// Checks a fully qualified ROS name (`/camera/image_raw`; `/` for the root namespace or
/// enclave): it starts with `/`, has no empty token (`//`), does not end with `/` (unless it is
/// `/`), and holds only ASCII letters, digits, `_` and `/`, none of the tokens starting with a
/// digit (ROS 2's name rules; they also keep Zenoh's key expression characters `*`, `$`, `?`,
/// `#` and `%` out).
pub fn check_name(field: &'static str, name: &str, root_allowed: bool) -> Result<(), NameError> {
    let err = |problem| Err(NameError { field, name: name.to_owned(), problem });
    if name == "/" {
        return if root_allowed { Ok(()) } else { err(NameProblem::Root) };
    }
    let Some(rest) = name.strip_prefix('/') else {
        return err(NameProblem::NotQualified);
    };
    for token in rest.split('/') {
        if token.is_empty() {
            return err(NameProblem::EmptyToken);
        }
        if !token.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            return err(NameProblem::Character);
        }
        if token.as_bytes()[0].is_ascii_digit() {
            return err(NameProblem::LeadingDigit);
        }
    }
    Ok(())
}

/// The key expression the messages of `topic` (fully qualified) are published on.
pub fn topic_key_expr(domain: u32, topic: &str) -> String {
    format!("{domain}/{}/{IMAGE_TYPE_NAME}/{IMAGE_TYPE_HASH}", topic.trim_matches('/'))
}

/// `name` with every `/` replaced by `%`.
pub fn mangle(name: &str) -> String {
    name.replace('/', "%")
}

/// Reliability of a topic's messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reliability {
    /// Delivered at most once, possibly lost (ROS `BEST_EFFORT`, rmw value 2).
    BestEffort,
    /// Retransmitted until delivered (ROS `RELIABLE`, rmw value 1).
    Reliable,
}

/// The QoS an entity announces in its token: keep-last history of `depth`, volatile
/// durability, the given reliability, infinite deadline, lifespan and lease, automatic
/// liveliness.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Qos {
    /// Reliability.
    pub reliability: Reliability,
    /// Keep-last depth (1 or more).
    pub depth: u32,
}

impl Qos {
    /// rmw_zenoh's QoS field for the token.
    pub fn key_expr(&self) -> String {
        let reliability = match self.reliability {
            Reliability::Reliable => "",
            Reliability::BestEffort => "2",
        };
        let depth = if self.depth == 42 { String::new() } else { self.depth.to_string() };
        // Durability volatile and history keep-last are rmw_zenoh's defaults: empty.
        format!("{reliability}::,{depth}:,:,:,,")
    }
}

/// An entity kind that has a topic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntityKind {
    /// A publisher (`MP`).
    Publisher,
    /// A subscription (`MS`).
    Subscription,
}

/// A node on the graph, as its tokens name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeName {
    /// ROS domain id.
    pub domain: u32,
    /// The Zenoh session's id, lowercase hex.
    pub zid: String,
    /// The node's number in its session.
    pub nid: u32,
    /// The security enclave (`/` by default).
    pub enclave: String,
    /// The namespace (`/` for the root).
    pub namespace: String,
    /// The node's name (no `/`).
    pub name: String,
}

impl NodeName {
    fn prefix(&self, id: u32, kind: &str) -> String {
        format!(
            "{ADMIN_SPACE}/{}/{}/{}/{id}/{kind}/{}/{}/{}",
            self.domain,
            self.zid,
            self.nid,
            mangle(&self.enclave),
            mangle(&self.namespace),
            mangle(&self.name)
        )
    }

    /// The node's liveliness token.
    pub fn token(&self) -> String {
        self.prefix(self.nid, "NN")
    }

    /// The liveliness token of the node's entity number `id` of `kind` on `topic` (fully
    /// qualified) for `sensor_msgs/msg/Image`.
    pub fn entity_token(&self, kind: EntityKind, id: u32, topic: &str, qos: &Qos) -> String {
        let kind = match kind {
            EntityKind::Publisher => "MP",
            EntityKind::Subscription => "MS",
        };
        format!(
            "{}/{}/{IMAGE_TYPE_NAME}/{IMAGE_TYPE_HASH}/{}",
            self.prefix(id, kind),
            mangle(topic),
            qos.key_expr()
        )
    }
}

/// The GID rmw_zenoh gives the entity whose liveliness token is `token`.
pub fn gid(token: &str) -> [u8; 16] {
    let h = xxhash_rust::xxh3::xxh3_128(token.as_bytes());
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&(h as u64).to_le_bytes());
    g[8..].copy_from_slice(&((h >> 64) as u64).to_le_bytes());
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node() -> NodeName {
        NodeName {
            domain: 0,
            zid: "8b7ab2b2c3d84c53c25d9eb4b4e4a3f2".into(),
            nid: 0,
            enclave: "/".into(),
            namespace: "/".into(),
            name: "nvsci_bridge".into(),
        }
    }

    #[test]
    fn topic_key_expressions() {
        let hash = IMAGE_TYPE_HASH;
        assert_eq!(
            topic_key_expr(0, "/camera/image_raw"),
            format!("0/camera/image_raw/sensor_msgs::msg::dds_::Image_/{hash}")
        );
        assert_eq!(topic_key_expr(42, "/image/"), format!("42/image/sensor_msgs::msg::dds_::Image_/{hash}"));
        assert_eq!(&hash[..7], "RIHS01_");
        assert_eq!(hash.len(), 7 + 64);
        assert!(hash[7..].bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    }

    #[test]
    fn qos_fields_match_the_design_doc() {
        // docs/design.md: reliable, keep-last 7 is `::,7:,:,:,,`.
        assert_eq!(Qos { reliability: Reliability::Reliable, depth: 7 }.key_expr(), "::,7:,:,:,,");
        assert_eq!(Qos { reliability: Reliability::BestEffort, depth: 1 }.key_expr(), "2::,1:,:,:,,");
        // Every value at rmw_zenoh's default.
        assert_eq!(Qos { reliability: Reliability::Reliable, depth: 42 }.key_expr(), "::,:,:,:,,");
    }

    #[test]
    fn tokens() {
        let n = node();
        assert_eq!(n.token(), "@ros2_lv/0/8b7ab2b2c3d84c53c25d9eb4b4e4a3f2/0/0/NN/%/%/nvsci_bridge");
        let qos = Qos { reliability: Reliability::BestEffort, depth: 1 };
        assert_eq!(
            n.entity_token(EntityKind::Publisher, 3, "/camera/image_raw", &qos),
            format!(
                "@ros2_lv/0/8b7ab2b2c3d84c53c25d9eb4b4e4a3f2/0/3/MP/%/%/nvsci_bridge/%camera%image_raw/\
                 sensor_msgs::msg::dds_::Image_/{IMAGE_TYPE_HASH}/2::,1:,:,:,,"
            )
        );
        let mut m = node();
        m.namespace = "/robot1/front".into();
        m.domain = 7;
        assert!(m
            .entity_token(
                EntityKind::Subscription,
                1,
                "/x",
                &Qos { reliability: Reliability::Reliable, depth: 7 }
            )
            .starts_with(
                "@ros2_lv/7/8b7ab2b2c3d84c53c25d9eb4b4e4a3f2/0/1/MS/%/%robot1%front/nvsci_bridge/%x/"
            ));
    }

    #[test]
    fn gid_is_xxh3_128_low_then_high_little_endian() {
        // XXH3-128 of the empty input (seed 0) is 0x99aa06d3014798d8_6001c324468d497f (the
        // xxHash reference's test vector).
        assert_eq!(
            gid(""),
            [
                0x7f, 0x49, 0x8d, 0x46, 0x24, 0xc3, 0x01, 0x60, // low 64 bits, LE
                0xd8, 0x98, 0x47, 0x01, 0xd3, 0x06, 0xaa, 0x99, // high 64 bits, LE
            ]
        );
        assert_ne!(gid("@ros2_lv/0/a"), gid("@ros2_lv/0/b"));
    }

    #[test]
    fn names() {
        assert_eq!(check_name("topic", "/camera/image_raw", false), Ok(()));
        assert_eq!(check_name("namespace", "/", true), Ok(()));
        for (bad, problem) in [
            ("/", NameProblem::Root),
            ("camera", NameProblem::NotQualified),
            ("/a//b", NameProblem::EmptyToken),
            ("/a/", NameProblem::EmptyToken),
            ("/a/*", NameProblem::Character),
            ("/a%b", NameProblem::Character),
            ("/1a", NameProblem::LeadingDigit),
        ] {
            assert_eq!(
                check_name("topic", bad, false),
                Err(NameError { field: "topic", name: bad.into(), problem }),
                "{bad}"
            );
        }
    }
}
