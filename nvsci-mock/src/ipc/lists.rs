//! Attribute-list descriptors: every slot's keys and value bytes, sealed with a checksum and
//! stamped with the endpoint's link id, so that a descriptor is only imported through the
//! endpoint it was exported to.

use super::codec::{fnv1a, Reader, Writer};
use crate::attrs::{self, KeySpec, Slot, Value};

const LIST_MAGIC: u64 = 0x4e56_4d4b_4c53_5431; // "NVMKLST1"

/// Which library a descriptor belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Lib {
    Buf = 1,
    Sync = 2,
}

/// A decoded list descriptor.
pub(crate) struct ListDesc {
    pub reconciled: bool,
    /// NvSciSync reconciled lists: the object metadata words.
    pub meta: Vec<u64>,
    pub slots: Vec<Slot>,
}

fn put_slot(w: &mut Writer, slot: &Slot, skip: Option<u32>) {
    let entries: Vec<(u32, &Value)> = slot.iter().filter(|(k, _)| Some(*k) != skip).collect();
    w.u32(entries.len() as u32);
    for (k, v) in entries {
        w.u32(k).u32(v.len() as u32).bytes(v.bytes());
    }
}

/// Encodes `slots` for the peer at `link`.
pub(crate) fn encode(lib: Lib, link: u64, reconciled: bool, meta: &[u64], slots: &[Slot]) -> Vec<u8> {
    let mut w = Writer::default();
    w.u64(LIST_MAGIC).u64(link).u8(lib as u8).u8(u8::from(reconciled)).u32(meta.len() as u32);
    for m in meta {
        w.u64(*m);
    }
    w.u32(slots.len() as u32);
    for s in slots {
        put_slot(&mut w, s, None);
    }
    w.seal()
}

/// Decodes a descriptor exported to `link`; `None` for anything that is not such a descriptor
/// (wrong magic, library or link, truncated, checksum mismatch, unknown keys, values whose
/// length is not a whole number of elements).
pub(crate) fn decode(bytes: &[u8], lib: Lib, link: u64, table: &'static [KeySpec]) -> Option<ListDesc> {
    let mut r = Reader::open(bytes)?;
    if r.u64()? != LIST_MAGIC || r.u64()? != link || r.u8()? != lib as u8 {
        return None;
    }
    let reconciled = match r.u8()? {
        0 => false,
        1 => true,
        _ => return None,
    };
    let nmeta = r.u32()? as usize;
    if nmeta > 16 {
        return None;
    }
    let meta = (0..nmeta).map(|_| r.u64()).collect::<Option<Vec<_>>>()?;
    let nslots = r.u32()? as usize;
    if nslots == 0 || nslots > 64 || (reconciled && nslots != 1) {
        return None;
    }
    let mut slots = Vec::with_capacity(nslots);
    for _ in 0..nslots {
        let n = r.u32()? as usize;
        let mut slot = Slot::default();
        for _ in 0..n.min(1024) {
            let key = r.u32()?;
            let len = r.u32()? as usize;
            let value = r.bytes(len)?;
            let spec = attrs::find(table, key)?;
            if value.is_empty()
                || spec.elem == 0
                || !value.len().is_multiple_of(spec.elem)
                || slot.get(key).is_some()
            {
                return None;
            }
            slot.insert(key, Value::new(value));
        }
        slots.push(slot);
    }
    r.is_done().then_some(ListDesc { reconciled, meta, slots })
}

/// A digest of a reconciled slot without `skip` (the per-handle permission key), used to check
/// that an object is imported with the list it was allocated from.
pub(crate) fn digest(slot: &Slot, skip: u32) -> u64 {
    let mut w = Writer::default();
    put_slot(&mut w, slot, Some(skip));
    fnv1a(&w.0)
}
