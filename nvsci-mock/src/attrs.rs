//! Attribute storage shared by NvSciBuf and NvSciSync lists: key descriptions, value validation,
//! slots, and the text rendering used by debug dumps and conflict reports.

use crate::ffi::{bad, Res};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::os::raw::c_void;

/// One attribute value, stored in 8-byte aligned memory so that the pointers handed out by the
/// getters can be read as any element type. The storage never moves while the value lives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Value {
    words: Box<[u64]>,
    len: usize,
}

impl Value {
    /// Copies `bytes` into a new value.
    pub(crate) fn new(bytes: &[u8]) -> Value {
        let mut words = vec![0u64; bytes.len().div_ceil(8).max(1)].into_boxed_slice();
        for (w, chunk) in words.iter_mut().zip(bytes.chunks(8)) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            *w = u64::from_ne_bytes(b);
        }
        Value { words, len: bytes.len() }
    }

    /// A value made of `u32` elements.
    pub(crate) fn from_u32s(v: &[u32]) -> Value {
        Value::new(&v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<_>>())
    }

    /// A value made of `u64` elements.
    pub(crate) fn from_u64s(v: &[u64]) -> Value {
        Value::new(&v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<_>>())
    }

    /// A single `bool`.
    pub(crate) fn from_bool(b: bool) -> Value {
        Value::new(&[u8::from(b)])
    }

    /// The stored bytes.
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: `words` owns at least `len` initialised bytes (len <= 8 * words.len()), and u8
        // has no alignment or validity requirements.
        unsafe { std::slice::from_raw_parts(self.words.as_ptr().cast::<u8>(), self.len) }
    }

    /// Address of the stored bytes, valid while this value lives.
    pub(crate) fn as_ptr(&self) -> *const c_void {
        self.words.as_ptr().cast()
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The value read as `u32` elements.
    pub(crate) fn u32s(&self) -> Vec<u32> {
        self.bytes()
            .chunks_exact(4)
            .map(|c| <[u8; 4]>::try_from(c).map(u32::from_ne_bytes).unwrap_or(0))
            .collect()
    }

    /// The value read as `u64` elements.
    pub(crate) fn u64s(&self) -> Vec<u64> {
        self.bytes()
            .chunks_exact(8)
            .map(|c| <[u8; 8]>::try_from(c).map(u64::from_ne_bytes).unwrap_or(0))
            .collect()
    }

    /// The first element read as `u32` (0 if too short).
    pub(crate) fn u32(&self) -> u32 {
        self.u32s().first().copied().unwrap_or(0)
    }

    /// The first element read as `u64` (0 if too short).
    pub(crate) fn u64(&self) -> u64 {
        self.u64s().first().copied().unwrap_or(0)
    }

    /// The first byte read as `bool`.
    pub(crate) fn bool(&self) -> bool {
        self.bytes().first().is_some_and(|b| *b != 0)
    }
}

#[derive(Clone, Debug)]
struct Entry {
    value: Value,
    /// Set keys are write-once; a clone of an unreconciled list unlocks them.
    locked: bool,
}

/// The attributes of one slot of a list.
#[derive(Clone, Debug, Default)]
pub(crate) struct Slot {
    entries: BTreeMap<u32, Entry>,
    /// The slot came from another process (an imported unreconciled list): it states that
    /// peer's requirements, not this process's.
    from_peer: bool,
}

impl Slot {
    /// Marks the slot as relayed by another process.
    pub(crate) fn mark_from_peer(&mut self) {
        self.from_peer = true;
    }

    /// Whether the slot was relayed by another process.
    pub(crate) fn is_from_peer(&self) -> bool {
        self.from_peer
    }

    /// The value of `key`, if set.
    pub(crate) fn get(&self, key: u32) -> Option<&Value> {
        self.entries.get(&key).map(|e| &e.value)
    }

    /// Whether `key` is set and may not be set again.
    pub(crate) fn is_locked(&self, key: u32) -> bool {
        self.entries.get(&key).is_some_and(|e| e.locked)
    }

    /// Sets `key` (locked against further writes).
    pub(crate) fn insert(&mut self, key: u32, value: Value) {
        self.entries.insert(key, Entry { value, locked: true });
    }

    /// A copy whose keys may all be set again.
    pub(crate) fn unlocked(&self) -> Slot {
        let mut s = self.clone();
        for e in s.entries.values_mut() {
            e.locked = false;
        }
        s
    }

    /// Every set key with its value, in key order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &Value)> {
        self.entries.iter().map(|(k, e)| (*k, &e.value))
    }
}

/// Who may set / read a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Settable in unreconciled lists only.
    In,
    /// Settable in unreconciled lists, present in reconciled lists.
    InOut,
    /// Computed by reconciliation; never settable.
    Out,
}

/// How many elements a value may hold.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Count {
    /// Exactly one.
    One,
    /// From one up to the given number.
    UpTo(usize),
}

/// Per-element validity check applied by the setters.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Check {
    Any,
    /// C `bool`: 0 or 1.
    Bool,
    /// One of the listed values.
    OneOf(&'static [u64]),
    /// Inclusive range.
    Range(u64, u64),
    /// Non-zero power of two.
    PowerOfTwo,
    NonZero,
    /// `NvSciBufAttrValGpuCache`: the trailing bool must be 0 or 1.
    GpuCache,
    /// `NvSciBufAttrValGpuCompression`: the compression type must be None or GenericCompressible.
    GpuCompression,
}

/// How an element is rendered in dumps.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fmt {
    Bool,
    Uint,
    Float,
    Hex,
    GpuCache,
    GpuCompression,
}

/// Description of one public attribute key.
#[derive(Debug)]
pub(crate) struct KeySpec {
    pub key: u32,
    pub name: &'static str,
    /// Element size in bytes.
    pub elem: usize,
    pub count: Count,
    pub access: Access,
    pub check: Check,
    pub fmt: Fmt,
}

/// Looks `key` up in `table`.
pub(crate) fn find(table: &'static [KeySpec], key: u32) -> Option<&'static KeySpec> {
    table.iter().find(|s| s.key == key)
}

fn uint(bytes: &[u8]) -> u64 {
    match bytes.len() {
        1 => u64::from(bytes[0]),
        2 => <[u8; 2]>::try_from(bytes).map(u16::from_ne_bytes).map(u64::from).unwrap_or(0),
        4 => <[u8; 4]>::try_from(bytes).map(u32::from_ne_bytes).map(u64::from).unwrap_or(0),
        8 => <[u8; 8]>::try_from(bytes).map(u64::from_ne_bytes).unwrap_or(0),
        _ => 0,
    }
}

/// Checks a value's length and elements against `spec` (the setters' rules).
pub(crate) fn validate(spec: &KeySpec, bytes: &[u8]) -> Res {
    if bytes.is_empty() || spec.elem == 0 || !bytes.len().is_multiple_of(spec.elem) {
        return bad();
    }
    let n = bytes.len() / spec.elem;
    let count_ok = match spec.count {
        Count::One => n == 1,
        Count::UpTo(max) => n <= max,
    };
    if !count_ok {
        return bad();
    }
    for e in bytes.chunks_exact(spec.elem) {
        let ok = match spec.check {
            Check::Any => true,
            Check::Bool => uint(e) <= 1,
            Check::OneOf(vals) => vals.contains(&uint(e)),
            Check::Range(lo, hi) => (lo..=hi).contains(&uint(e)),
            Check::PowerOfTwo => uint(e).is_power_of_two(),
            Check::NonZero => uint(e) != 0,
            Check::GpuCache => e.get(16).is_some_and(|b| *b <= 1),
            Check::GpuCompression => e.get(16..20).is_some_and(|t| uint(t) <= 1),
        };
        if !ok {
            return bad();
        }
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Renders one element.
fn format_elem(fmt: Fmt, e: &[u8]) -> String {
    match fmt {
        Fmt::Bool => (uint(e) != 0).to_string(),
        Fmt::Uint => uint(e).to_string(),
        Fmt::Float => f32::from_bits(uint(e) as u32).to_string(),
        Fmt::Hex => hex(e),
        Fmt::GpuCache => format!(
            "{{gpu {}, cacheability {}}}",
            hex(e.get(..16).unwrap_or_default()),
            e.get(16).is_some_and(|b| *b != 0)
        ),
        Fmt::GpuCompression => format!(
            "{{gpu {}, compression {}}}",
            hex(e.get(..16).unwrap_or_default()),
            uint(e.get(16..20).unwrap_or_default())
        ),
    }
}

/// Renders a value: a single element plainly, several as `[a, b]`.
pub(crate) fn format_value(spec: &KeySpec, v: &Value) -> String {
    let bytes = v.bytes();
    if spec.elem == 0 || !bytes.len().is_multiple_of(spec.elem) {
        return format!("<{} bytes>", bytes.len());
    }
    let elems: Vec<String> = bytes.chunks_exact(spec.elem).map(|e| format_elem(spec.fmt, e)).collect();
    if elems.len() == 1 {
        elems.into_iter().next().unwrap_or_default()
    } else {
        format!("[{}]", elems.join(", "))
    }
}

/// A key/value pair as passed by the caller (both NvSciBuf and NvSciSync pairs share this layout).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawPair {
    pub key: u32,
    pub value: *const c_void,
    pub len: usize,
}

/// Validates the pairs of a SetAttrs call against `table` and the current contents of `slot`;
/// returns the values to store. Nothing is stored here, so a failing call leaves the list as it
/// was.
///
/// # Safety
/// Every non-NULL `value` must be readable for `len` bytes.
pub(crate) unsafe fn stage(
    table: &'static [KeySpec],
    pairs: &[RawPair],
    slot: &Slot,
) -> Res<Vec<(&'static KeySpec, Value)>> {
    let mut staged: Vec<(&'static KeySpec, Value)> = Vec::with_capacity(pairs.len());
    for p in pairs {
        let spec = find(table, p.key).ok_or(nvsci_sys::NvSciError_BadParameter)?;
        if spec.access == Access::Out || p.value.is_null() || p.len == 0 {
            return bad();
        }
        if staged.iter().any(|(s, _)| s.key == p.key) || slot.is_locked(p.key) {
            return bad();
        }
        // Bound the read by the largest legal length before touching caller memory.
        let max = match spec.count {
            Count::One => spec.elem,
            Count::UpTo(n) => spec.elem.saturating_mul(n),
        };
        if p.len > max {
            return bad();
        }
        // SAFETY: `value` is non-NULL and readable for `len` bytes per the caller's contract.
        let bytes = unsafe { std::slice::from_raw_parts(p.value.cast::<u8>(), p.len) };
        validate(spec, bytes)?;
        staged.push((spec, Value::new(bytes)));
    }
    Ok(staged)
}

/// Renders a whole list for `Nv*AttrListDebugDump`.
pub(crate) fn dump(table: &'static [KeySpec], title: &str, reconciled: bool, slots: &[Slot]) -> String {
    let mut s = format!("{title}: reconciled={reconciled}, slots={}\n", slots.len());
    for (i, slot) in slots.iter().enumerate() {
        let _ = writeln!(s, "slot {i}:");
        for (key, v) in slot.iter() {
            match find(table, key) {
                Some(spec) => {
                    let _ = writeln!(s, "  {} = {}", spec.name, format_value(spec, v));
                }
                None => {
                    let _ = writeln!(s, "  key 0x{key:x} = <{} bytes>", v.len());
                }
            }
        }
    }
    s
}

/// What kind of list a record is; fixed at creation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Flags {
    pub reconciled: bool,
    /// SetAttrs allowed (single-slot unreconciled lists from Create or Clone).
    pub writable: bool,
    /// Conflict list produced by a failed reconciliation.
    pub conflict: bool,
    /// Owned by an object (`Nv*ObjGetAttrList`): not counted, never freed by the caller.
    pub borrowed: bool,
}

impl Flags {
    pub(crate) const UNRECONCILED: Flags =
        Flags { reconciled: false, writable: true, conflict: false, borrowed: false };
    pub(crate) const APPENDED: Flags =
        Flags { reconciled: false, writable: false, conflict: false, borrowed: false };
    pub(crate) const RECONCILED: Flags =
        Flags { reconciled: true, writable: false, conflict: false, borrowed: false };
    pub(crate) const CONFLICT: Flags =
        Flags { reconciled: false, writable: false, conflict: true, borrowed: false };
    pub(crate) const OBJECT_VIEW: Flags =
        Flags { reconciled: true, writable: false, conflict: false, borrowed: true };
}

/// One conflicting key found by a reconciliation.
#[derive(Debug)]
pub(crate) struct Conflict {
    pub key: u32,
    /// Stored in the conflict list: the first slot's value, or one zero byte for a missing key.
    pub value: Value,
    /// One report line, starting with the key name.
    pub reason: String,
}

/// Collects conflicts during a reconciliation, one entry per key (reasons are merged).
pub(crate) struct Conflicts<'a> {
    table: &'static [KeySpec],
    slots: &'a [Slot],
    pub list: Vec<Conflict>,
}

impl<'a> Conflicts<'a> {
    pub(crate) fn new(table: &'static [KeySpec], slots: &'a [Slot]) -> Self {
        Conflicts { table, slots, list: Vec::new() }
    }

    /// The slots being reconciled.
    pub(crate) fn slots(&self) -> &'a [Slot] {
        self.slots
    }

    /// Name of `key` in reports.
    pub(crate) fn name(&self, key: u32) -> String {
        find(self.table, key).map_or_else(|| format!("key 0x{key:x}"), |s| s.name.to_owned())
    }

    /// `slot N = value` for every slot that sets `key`.
    pub(crate) fn values_text(&self, key: u32) -> String {
        let spec = find(self.table, key);
        self.setters(key)
            .iter()
            .map(|(i, v)| {
                let shown = spec.map_or_else(|| format!("<{} bytes>", v.len()), |s| format_value(s, v));
                format!("slot {i} = {shown}")
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Every `(slot index, value)` that sets `key`.
    pub(crate) fn setters(&self, key: u32) -> Vec<(usize, &'a Value)> {
        self.slots.iter().enumerate().filter_map(|(i, s)| s.get(key).map(|v| (i, v))).collect()
    }

    /// Records a conflict on `key` with the given explanation (appended to the key's line).
    pub(crate) fn add(&mut self, key: u32, detail: String) {
        if let Some(c) = self.list.iter_mut().find(|c| c.key == key) {
            c.reason.push_str("; ");
            c.reason.push_str(&detail);
            return;
        }
        let value = self.setters(key).first().map_or_else(|| Value::new(&[0]), |(_, v)| (*v).clone());
        let reason = format!("{}: {}", self.name(key), detail);
        self.list.push(Conflict { key, value, reason });
    }

    /// The value every setter of `key` agrees on (`None` when no slot sets it). Disagreement is
    /// recorded as a conflict listing every slot's value, and `None` is returned.
    pub(crate) fn agree(&mut self, key: u32) -> Option<Value> {
        let setters = self.setters(key);
        let first = setters.first()?.1;
        if setters.iter().all(|(_, v)| *v == first) {
            return Some(first.clone());
        }
        let text = self.values_text(key);
        self.add(key, text);
        None
    }

    /// Whether any slot sets `key`.
    pub(crate) fn any_set(&self, key: u32) -> bool {
        self.slots.iter().any(|s| s.get(key).is_some())
    }

    /// Whether any slot sets the bool `key` to true.
    pub(crate) fn any_true(&self, key: u32) -> bool {
        self.slots.iter().any(|s| s.get(key).is_some_and(Value::bool))
    }

    /// The report: one line per conflicting key.
    pub(crate) fn report(&self) -> String {
        self.list.iter().map(|c| format!("{}\n", c.reason)).collect()
    }

    /// A single-slot list body holding every conflicting key.
    pub(crate) fn slot(&self) -> Slot {
        let mut s = Slot::default();
        for c in &self.list {
            s.insert(c.key, c.value.clone());
        }
        s
    }
}
