//! NvSciBuf reconciliation: merges the slots of unreconciled lists into one reconciled slot.
//!
//! Order of checks: (1) a mandatory key missing from every slot (`Types`) or no common type →
//! `BadParameter` / conflict; (2) every cross-slot conflict is collected and reported together
//! as `ReconciliationFailed`; (3) missing mandatory keys → `BadParameter`; (4) values or
//! combinations the mock cannot provide → `NotSupported` with a conflict list holding the refused
//! key and the value given, its dump saying why (or `BadParameter` for values the documentation
//! calls unsupported, such as a zero plane width).
//!
//! General keys (mock = one dGPU-style device with system memory, no other engines):
//! * `NeedCpuAccess`, `EnableCpuCache`: true if any slot sets true.
//! * `ActualPerm`: max of `RequiredPerm` over slots (default Readonly); `RequiredPerm` itself is
//!   input-only and absent from the reconciled list.
//! * `GpuId`: union, in order of first appearance; unset when no slot names a GPU.
//! * `EnableGpuCache`: one entry per GpuId; for each GPU the AND over every slot of the value that
//!   slot gives, a slot that gives none contributing the documented default for the GPU's kind:
//!   `false` for a discrete GPU on sysmem (the mock's default), `true` for an integrated GPU
//!   (Tegra iGPU on sysmem; see `crate::set_gpu_integrated`). An entry naming a GPU absent from the
//!   GpuId union is a conflict.
//! * `GpuSwNeedCacheCoherency`: one entry per GpuId; true when that GPU is cached and either
//!   another GPU is uncached or any slot needs CPU access (the documented sysmem rule).
//! * `EnableGpuCompression`: entries must name GPUs of the union and agree per GPU (else
//!   conflict); the mock never compresses, so every GPU reconciles to `None`.
//! * `CpuNeedSwCacheCoherency`: true if NeedCpuAccess and EnableCpuCache are set and an ISO engine
//!   (VI, ISP, display) is named in PeerHwEngineArray, or the module setting says so (see
//!   `set_cpu_need_sw_cache_coherency`).
//! * `VidMem_GpuId`: must agree; video memory is not emulated → `NotSupported`.
//! * `PeerLocationInfo`, `PeerHwEngineArray`: union of the elements (each element once, compared
//!   byte for byte, in order of first appearance; absent when no slot sets the key). Element
//!   values are not checked: engines and platforms the mock does not know are kept as given.
//!
//! RawBuffer: `Size` must be set by at least one slot and equal in every slot that sets it;
//! `Align` = max; unset, the alignment the mock allocates with, the page size (nvscibuf.h: "set
//! to default alignment with which buffer is allocated if none of the unreconciled lists
//! specify this attribute").
//!
//! Image (plane-based; pitch-linear or block-linear, progressive or interlaced, with or without
//! padding): `Layout`, `ScanType`, `PlaneCount`, `PlaneColorFormat`, `PlaneWidth`,
//! `PlaneHeight` are mandatory; they and `PlaneColorStd`, the paddings and `ImageCount` must be
//! equal in every slot that sets them (`ImageCount` accepts only 1, its one valid input value in
//! nvscibuf.h). `PlaneBaseAddrAlign` is the per-plane max; the paddings default to 0. See
//! [`super::image`] for the layout. `VprFlag` must be false, surface-based keys unset and every
//! color format one the mock knows the size of, else `NotSupported`.

use super::image::{self, PlaneIn, MOCK_PLANE_ALIGN};
use super::keys::BUF_KEYS;
use crate::attrs::{Conflicts, Slot, Value};
use nvsci_sys::*;
use std::collections::BTreeSet;

/// Why a reconciliation did not produce a list.
#[derive(Debug)]
pub(crate) enum Failure {
    /// An error without conflict list.
    Code(NvSciError),
    /// Conflicting attributes: the conflict list body and its report.
    Conflicts { slot: Slot, report: String },
    /// A value the mock does not emulate (`NotSupported`): a list body holding the key with the
    /// value given, and a report naming both, handed back like a conflict list.
    Unsupported { slot: Slot, report: String },
}

impl From<NvSciError> for Failure {
    fn from(e: NvSciError) -> Self {
        Failure::Code(e)
    }
}

type Res<T> = Result<T, Failure>;

const SURFACE_KEYS: [u32; 8] = [
    NvSciBufImageAttrKey_SurfType,
    NvSciBufImageAttrKey_SurfMemLayout,
    NvSciBufImageAttrKey_SurfSampleType,
    NvSciBufImageAttrKey_SurfBPC,
    NvSciBufImageAttrKey_SurfComponentOrder,
    NvSciBufImageAttrKey_SurfWidthBase,
    NvSciBufImageAttrKey_SurfHeightBase,
    NvSciBufImageAttrKey_SurfColorStd,
];

const PADDING_KEYS: [u32; 4] = [
    NvSciBufImageAttrKey_TopPadding,
    NvSciBufImageAttrKey_BottomPadding,
    NvSciBufImageAttrKey_LeftPadding,
    NvSciBufImageAttrKey_RightPadding,
];

type GpuId = [u8; 16];

fn gpu_id(bytes: &[u8]) -> GpuId {
    let mut id = [0u8; 16];
    if let Some(b) = bytes.get(..16) {
        id.copy_from_slice(b);
    }
    id
}

fn hex(id: &GpuId) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

fn fail(c: &Conflicts<'_>) -> Failure {
    Failure::Conflicts { slot: c.slot(), report: c.report() }
}

/// `NotSupported` naming `key` and the values the slots give it, and why the mock refuses it.
fn unsupported(c: &Conflicts<'_>, key: u32, why: &str) -> Failure {
    let mut u = Conflicts::new(BUF_KEYS, c.slots());
    let text = u.values_text(key);
    u.add(key, format!("{text}: {why}"));
    Failure::Unsupported { slot: u.slot(), report: u.report() }
}

/// GPUs declared integrated ([`crate::set_gpu_integrated`]); every other GPU is discrete.
pub(crate) static INTEGRATED_GPUS: std::sync::Mutex<Vec<GpuId>> = std::sync::Mutex::new(Vec::new());

/// The settings reconciliation reads.
#[derive(Clone, Debug, Default)]
pub(crate) struct Env {
    /// The module's CpuNeedSwCacheCoherency setting.
    pub cpu_sw_coherency: bool,
    /// GPUs that are integrated (iGPU): their `EnableGpuCache` default is true.
    pub integrated_gpus: Vec<GpuId>,
}

/// Reconciles `slots` under the module settings `env`.
pub(crate) fn reconcile(slots: &[Slot], env: &Env) -> Res<Slot> {
    let mut c = Conflicts::new(BUF_KEYS, slots);
    let mut out = Slot::default();

    let types = reconcile_types(&mut c)?;
    general(&mut c, &mut out, env);
    let image_in = if types == [NvSciBufType_RawBuffer] {
        raw_buffer_conflicts(&mut c);
        None
    } else {
        Some(image_conflicts(&mut c))
    };
    if !c.list.is_empty() {
        return Err(fail(&c));
    }
    if c.any_set(NvSciBufGeneralAttrKey_VidMem_GpuId) {
        return Err(unsupported(
            &c,
            NvSciBufGeneralAttrKey_VidMem_GpuId,
            "video memory is not emulated by the mock",
        ));
    }
    out.insert(NvSciBufGeneralAttrKey_Types, Value::from_u32s(&types));
    match image_in {
        None => raw_buffer(&c, &mut out)?,
        Some(agreed) => image(&c, agreed, &mut out)?,
    }
    Ok(out)
}

/// Types: every slot that sets Types must give the same set; only RawBuffer or Image alone is
/// supported by the mock.
fn reconcile_types(c: &mut Conflicts<'_>) -> Res<Vec<u32>> {
    let setters = c.setters(NvSciBufGeneralAttrKey_Types);
    let Some((_, first)) = setters.first() else {
        return Err(NvSciError_BadParameter.into());
    };
    let mut ordered: Vec<u32> = Vec::new();
    for t in first.u32s() {
        if !ordered.contains(&t) {
            ordered.push(t);
        }
    }
    let set_of = |v: &Value| v.u32s().into_iter().collect::<BTreeSet<u32>>();
    let reference = set_of(first);
    if setters.iter().any(|(_, v)| set_of(v) != reference) {
        let union: BTreeSet<u32> = setters.iter().flat_map(|(_, v)| v.u32s()).collect();
        if union == BTreeSet::from([NvSciBufType_Image, NvSciBufType_Tensor]) {
            // The documented Image+Tensor co-reconciliation; tensors are not emulated.
            return Err(unsupported(c, NvSciBufGeneralAttrKey_Types, "tensors are not emulated by the mock"));
        }
        let text = c.values_text(NvSciBufGeneralAttrKey_Types);
        c.add(NvSciBufGeneralAttrKey_Types, text);
        return Err(fail(c));
    }
    if ordered != [NvSciBufType_RawBuffer] && ordered != [NvSciBufType_Image] {
        let why = if ordered.contains(&NvSciBufType_Tensor) {
            "tensors are not emulated by the mock"
        } else {
            "the mock emulates raw buffers and images, each alone in a list"
        };
        return Err(unsupported(c, NvSciBufGeneralAttrKey_Types, why));
    }
    Ok(ordered)
}

/// The isochronous engines of `NvSciBufHwEngName` (camera input, image signal processor,
/// display): an ISO engine operating on a buffer with CPU caching makes the CPU responsible for
/// cache maintenance (`CpuNeedSwCacheCoherency`).
const ISO_ENGINES: [u32; 3] = [NvSciBufHwEngName_Vi, NvSciBufHwEngName_Isp, NvSciBufHwEngName_Display];

/// General keys; conflicts are recorded in `c`.
fn general(c: &mut Conflicts<'_>, out: &mut Slot, env: &Env) {
    let need_cpu = c.any_true(NvSciBufGeneralAttrKey_NeedCpuAccess);
    let cpu_cache = c.any_true(NvSciBufGeneralAttrKey_EnableCpuCache);
    // nvscibuf.h (NvSciBuf 2.10), NvSciBufGeneralAttrKey_CpuNeedSwCacheCoherency: "It is set to
    // true in reconciled NvSciBufAttrList if both NvSciBufGeneralAttrKey_EnableCpuCache and
    // NvSciBufGeneralAttrKey_NeedCpuAccess are requested by setting them to true in any of the
    // unreconciled NvSciBufAttrList(s) from which reconciled NvSciBufAttrList is obtained and any
    // of the ISO engines would operate on the buffer." The engines the public keys can name are
    // those of PeerHwEngineArray; the ISO (isochronous) ones among them are `ISO_ENGINES`. The
    // module setting (`set_cpu_need_sw_cache_coherency`) forces it on as well.
    let iso = c.setters(NvSciBufGeneralAttrKey_PeerHwEngineArray).iter().any(|(_, v)| {
        v.bytes().chunks_exact(8).any(|e| ISO_ENGINES.contains(&u32::from_ne_bytes([e[0], e[1], e[2], e[3]])))
    });
    let cpu_sw_coherency = env.cpu_sw_coherency || (need_cpu && cpu_cache && iso);
    out.insert(NvSciBufGeneralAttrKey_NeedCpuAccess, Value::from_bool(need_cpu));
    out.insert(NvSciBufGeneralAttrKey_EnableCpuCache, Value::from_bool(cpu_cache));
    out.insert(NvSciBufGeneralAttrKey_CpuNeedSwCacheCoherency, Value::from_bool(cpu_sw_coherency));
    let perm = c
        .setters(NvSciBufGeneralAttrKey_RequiredPerm)
        .iter()
        .map(|(_, v)| v.u32())
        .max()
        .unwrap_or(NvSciBufAccessPerm_Readonly);
    out.insert(NvSciBufGeneralAttrKey_ActualPerm, Value::from_u32s(&[perm]));

    // GpuId union.
    let mut gpus: Vec<GpuId> = Vec::new();
    for (_, v) in c.setters(NvSciBufGeneralAttrKey_GpuId) {
        for id in v.bytes().chunks_exact(16).map(gpu_id) {
            if !gpus.contains(&id) {
                gpus.push(id);
            }
        }
    }

    // EnableGpuCache: AND per GPU; a slot that gives no value contributes the documented default
    // for the GPU's kind (true for an integrated GPU on sysmem, false for a discrete one).
    let cache_setters = c.setters(NvSciBufGeneralAttrKey_EnableGpuCache);
    for (i, v) in &cache_setters {
        for e in v.bytes().chunks_exact(17) {
            let id = gpu_id(e);
            if !gpus.contains(&id) {
                c.add(
                    NvSciBufGeneralAttrKey_EnableGpuCache,
                    format!("slot {i} names GPU {} which is not in NvSciBufGeneralAttrKey_GpuId", hex(&id)),
                );
            }
        }
    }
    let slots = c.slots();
    let cached: Vec<bool> = gpus
        .iter()
        .map(|g| {
            slots.iter().all(|s| {
                s.get(NvSciBufGeneralAttrKey_EnableGpuCache)
                    .and_then(|v| v.bytes().chunks_exact(17).find(|e| gpu_id(e) == *g).map(|e| e[16] != 0))
                    .unwrap_or(env.integrated_gpus.contains(g))
            })
        })
        .collect();

    // EnableGpuCompression: must name known GPUs and agree per GPU.
    let mut compression: Vec<(GpuId, u32, usize)> = Vec::new();
    for (i, v) in c.setters(NvSciBufGeneralAttrKey_EnableGpuCompression) {
        for e in v.bytes().chunks_exact(20) {
            let id = gpu_id(e);
            let kind = Value::new(&e[16..20]).u32();
            if !gpus.contains(&id) {
                c.add(
                    NvSciBufGeneralAttrKey_EnableGpuCompression,
                    format!("slot {i} names GPU {} which is not in NvSciBufGeneralAttrKey_GpuId", hex(&id)),
                );
            } else if let Some((_, k0, i0)) = compression.iter().find(|(g, _, _)| *g == id) {
                if *k0 != kind {
                    c.add(
                        NvSciBufGeneralAttrKey_EnableGpuCompression,
                        format!("GPU {}: slot {i0} = {k0}, slot {i} = {kind}", hex(&id)),
                    );
                }
            } else {
                compression.push((id, kind, i));
            }
        }
    }

    c.agree(NvSciBufGeneralAttrKey_VidMem_GpuId);

    if !gpus.is_empty() {
        let ids: Vec<u8> = gpus.iter().flatten().copied().collect();
        out.insert(NvSciBufGeneralAttrKey_GpuId, Value::new(&ids));
        let mut cache = Vec::new();
        let mut sw = Vec::new();
        let mut comp = Vec::new();
        for (k, g) in gpus.iter().enumerate() {
            let this = cached.get(k).copied().unwrap_or(false);
            let other_uncached = cached.iter().enumerate().any(|(j, c)| j != k && !c);
            cache.extend_from_slice(g);
            cache.push(u8::from(this));
            sw.extend_from_slice(g);
            sw.push(u8::from(this && (other_uncached || need_cpu)));
            comp.extend_from_slice(g);
            comp.extend_from_slice(&NvSciBufCompressionType_None.to_ne_bytes());
        }
        out.insert(NvSciBufGeneralAttrKey_EnableGpuCache, Value::new(&cache));
        out.insert(NvSciBufGeneralAttrKey_GpuSwNeedCacheCoherency, Value::new(&sw));
        out.insert(NvSciBufGeneralAttrKey_EnableGpuCompression, Value::new(&comp));
    }

    for (key, elem) in
        [(NvSciBufGeneralAttrKey_PeerLocationInfo, 16), (NvSciBufGeneralAttrKey_PeerHwEngineArray, 8)]
    {
        let mut union: Vec<u8> = Vec::new();
        for (_, v) in c.setters(key) {
            for e in v.bytes().chunks_exact(elem) {
                if !union.chunks_exact(elem).any(|u| u == e) {
                    union.extend_from_slice(e);
                }
            }
        }
        if !union.is_empty() {
            out.insert(key, Value::new(&union));
        }
    }
}

fn raw_buffer_conflicts(c: &mut Conflicts<'_>) {
    c.agree(NvSciBufRawBufferAttrKey_Size);
}

fn raw_buffer(c: &Conflicts<'_>, out: &mut Slot) -> Res<()> {
    let size = c
        .setters(NvSciBufRawBufferAttrKey_Size)
        .first()
        .map(|(_, v)| v.u64())
        .ok_or(NvSciError_BadParameter)?;
    // Unset: "the default alignment with which the buffer is allocated" (nvscibuf.h), the page
    // for the mock's allocations.
    let align = c
        .setters(NvSciBufRawBufferAttrKey_Align)
        .iter()
        .map(|(_, v)| v.u64())
        .max()
        .unwrap_or(crate::pages::page_size() as u64);
    out.insert(NvSciBufRawBufferAttrKey_Size, Value::from_u64s(&[size]));
    out.insert(NvSciBufRawBufferAttrKey_Align, Value::from_u64s(&[align]));
    Ok(())
}

/// Image keys that must agree across slots, collected before any other image check.
#[derive(Debug, Default)]
struct ImageAgreed {
    layout: Option<Value>,
    scan: Option<Value>,
    count: Option<Value>,
    formats: Option<Value>,
    widths: Option<Value>,
    heights: Option<Value>,
    color_std: Option<Value>,
    image_count: Option<Value>,
    paddings: Vec<Option<Value>>,
}

fn image_conflicts(c: &mut Conflicts<'_>) -> ImageAgreed {
    for key in SURFACE_KEYS {
        c.agree(key);
    }
    ImageAgreed {
        layout: c.agree(NvSciBufImageAttrKey_Layout),
        scan: c.agree(NvSciBufImageAttrKey_ScanType),
        count: c.agree(NvSciBufImageAttrKey_PlaneCount),
        formats: c.agree(NvSciBufImageAttrKey_PlaneColorFormat),
        widths: c.agree(NvSciBufImageAttrKey_PlaneWidth),
        heights: c.agree(NvSciBufImageAttrKey_PlaneHeight),
        color_std: c.agree(NvSciBufImageAttrKey_PlaneColorStd),
        image_count: c.agree(NvSciBufImageAttrKey_ImageCount),
        paddings: PADDING_KEYS.iter().map(|k| c.agree(*k)).collect(),
    }
}

fn image(c: &Conflicts<'_>, a: ImageAgreed, out: &mut Slot) -> Res<()> {
    if let Some(k) = SURFACE_KEYS.iter().find(|k| c.any_set(**k)) {
        return Err(unsupported(c, *k, "surface-based image keys are not emulated by the mock"));
    }
    let bad = || Failure::Code(NvSciError_BadParameter);
    let layout = a.layout.ok_or_else(bad)?.u32();
    let scan = a.scan.ok_or_else(bad)?.u32();
    let n = a.count.ok_or_else(bad)?.u32() as usize;
    let formats = a.formats.ok_or_else(bad)?.u32s();
    let widths = a.widths.ok_or_else(bad)?.u32s();
    let heights = a.heights.ok_or_else(bad)?.u32s();
    // Any value of the two enums is valid input (nvscibuf.h, `Layout` and `ScanType`: "valid
    // input value: Any value defined by" the enum); SetAttrs has already refused the others.
    let block_linear = layout == NvSciBufImage_BlockLinearType;
    let interlaced = scan == NvSciBufScan_InterlaceType;
    // Every per-plane key holds one element per plane (`PlaneCount`); another length is "an
    // attribute key ... set to an unsupported value considering the data type(s)", which
    // NvSciBufAttrListReconcile refuses with BadParameter (nvscibuf.h). The same below for
    // `PlaneColorStd`, the paddings and `PlaneBaseAddrAlign`.
    if formats.len() != n || widths.len() != n || heights.len() != n {
        return Err(bad());
    }
    if widths.contains(&0) || heights.contains(&0) {
        return Err(bad());
    }
    let color_std = match a.color_std {
        Some(v) if v.u32s().len() != n => return Err(bad()),
        Some(v) => v.u32s(),
        None => formats.iter().map(|f| image::default_color_std(*f)).collect(),
    };
    // Paddings: per plane, in pixels, default 0 (nvscibuf.h, `TopPadding` ... `RightPadding`).
    let mut paddings = [vec![0u64; n], vec![0u64; n], vec![0u64; n], vec![0u64; n]];
    for (dst, p) in paddings.iter_mut().zip(&a.paddings) {
        if let Some(v) = p {
            if v.u64s().len() != n {
                return Err(bad());
            }
            *dst = v.u64s();
        }
    }
    if c.any_true(NvSciBufImageAttrKey_VprFlag) {
        return Err(unsupported(
            c,
            NvSciBufImageAttrKey_VprFlag,
            "protected (VPR) memory is not emulated by the mock",
        ));
    }
    let infos =
        formats.iter().map(|f| image::format_info(*f)).collect::<Option<Vec<_>>>().ok_or_else(|| {
            unsupported(
                c,
                NvSciBufImageAttrKey_PlaneColorFormat,
                "a color format whose pixel size the mock does not know",
            )
        })?;
    // Per-plane base alignment: max over slots, at least the mock's plane alignment.
    let mut aligns = vec![MOCK_PLANE_ALIGN; n];
    for (_, v) in c.setters(NvSciBufImageAttrKey_PlaneBaseAddrAlign) {
        let given = v.u32s();
        if given.len() != n {
            return Err(bad());
        }
        for (a, g) in aligns.iter_mut().zip(given) {
            *a = (*a).max(u64::from(g));
        }
    }
    // Block-linear planes a GPU maps as CUDA arrays start where the GPU's arrays may start (the
    // mock's choice for the GPU's constraint, measured on an H100: image::GPU_ARRAY_PLANE_ALIGN).
    if block_linear && c.any_set(NvSciBufGeneralAttrKey_GpuId) {
        for a in &mut aligns {
            *a = (*a).max(image::GPU_ARRAY_PLANE_ALIGN);
        }
    }
    let planes: Vec<PlaneIn> = (0..n)
        .map(|i| PlaneIn {
            width: widths[i],
            height: heights[i],
            bits_per_pixel: infos[i].bits_per_pixel,
            align: aligns[i],
            padding: [paddings[0][i], paddings[1][i], paddings[2][i], paddings[3][i]],
            block_linear,
            interlaced,
        })
        .collect();
    let (layout_out, size) = image::layout(&planes)?;

    let u32s = |f: &dyn Fn(usize) -> u32| Value::from_u32s(&(0..n).map(f).collect::<Vec<_>>());
    let u64s = |f: &dyn Fn(usize) -> u64| Value::from_u64s(&(0..n).map(f).collect::<Vec<_>>());
    out.insert(NvSciBufImageAttrKey_Layout, Value::from_u32s(&[layout]));
    out.insert(NvSciBufImageAttrKey_ScanType, Value::from_u32s(&[scan]));
    for (key, values) in PADDING_KEYS.iter().zip(&paddings) {
        out.insert(*key, Value::from_u64s(values));
    }
    out.insert(NvSciBufImageAttrKey_VprFlag, Value::from_bool(false));
    out.insert(NvSciBufImageAttrKey_Size, Value::from_u64s(&[size]));
    out.insert(NvSciBufImageAttrKey_Alignment, Value::from_u64s(&[aligns[0]]));
    out.insert(NvSciBufImageAttrKey_PlaneCount, Value::from_u32s(&[n as u32]));
    out.insert(NvSciBufImageAttrKey_PlaneColorFormat, Value::from_u32s(&formats));
    out.insert(NvSciBufImageAttrKey_PlaneColorStd, Value::from_u32s(&color_std));
    out.insert(NvSciBufImageAttrKey_PlaneBaseAddrAlign, u32s(&|i| aligns[i] as u32));
    out.insert(NvSciBufImageAttrKey_PlaneWidth, Value::from_u32s(&widths));
    out.insert(NvSciBufImageAttrKey_PlaneHeight, Value::from_u32s(&heights));
    out.insert(NvSciBufImageAttrKey_PlaneBitsPerPixel, u32s(&|i| infos[i].bits_per_pixel));
    out.insert(NvSciBufImageAttrKey_PlaneOffset, u64s(&|i| layout_out[i].offset));
    out.insert(NvSciBufImageAttrKey_PlaneDatatype, u32s(&|i| infos[i].datatype));
    out.insert(
        NvSciBufImageAttrKey_PlaneChannelCount,
        Value::new(&infos.iter().map(|f| f.channels).collect::<Vec<u8>>()),
    );
    out.insert(NvSciBufImageAttrKey_PlaneSecondFieldOffset, u64s(&|i| layout_out[i].second_field_offset));
    out.insert(NvSciBufImageAttrKey_PlanePitch, u32s(&|i| layout_out[i].pitch));
    out.insert(NvSciBufImageAttrKey_PlaneAlignedHeight, u32s(&|i| layout_out[i].aligned_height));
    out.insert(NvSciBufImageAttrKey_PlaneAlignedSize, u64s(&|i| layout_out[i].aligned_size));
    let image_count = a.image_count.map_or(1, |v| v.u64());
    out.insert(NvSciBufImageAttrKey_ImageCount, Value::from_u64s(&[image_count]));
    Ok(())
}
