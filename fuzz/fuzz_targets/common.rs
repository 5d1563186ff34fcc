//! Decoding fuzz input into typed attributes (shared by the targets).
#![allow(dead_code)]

use nvsci::buf::{BufAttr, BufType, ColorFormat, ImageLayout, Perm, ScanType};

/// Reads little pieces of the input; every read succeeds (zeros once the input is used up).
pub struct Input<'a>(pub &'a [u8]);

impl Input<'_> {
    pub fn u8(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    pub fn u64(&mut self) -> u64 {
        (self.u32() as u64) | ((self.u32() as u64) << 32)
    }
    pub fn bytes(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Values a typed attribute borrows.
#[derive(Default)]
pub struct Store {
    pub types: Vec<BufType>,
    pub formats: Vec<ColorFormat>,
    pub dims: Vec<u32>,
    pub pads: Vec<u64>,
}

/// A kind of typed attribute and its scalar, decoded from the input (sizes capped so that
/// allocations stay small).
pub enum Pick {
    Types(usize),
    RawSize(u64),
    RawAlign(u64),
    Layout(ImageLayout),
    Scan(ScanType),
    PlaneCount(u32),
    Formats(usize),
    Widths(usize),
    Heights(usize),
    Cpu(bool),
    Perm(Perm),
    /// Top, bottom, left or right padding (0..4) over `pads`.
    Padding(u8),
}

pub fn pick(i: &mut Input<'_>, s: &mut Store) -> Pick {
    let n = (i.u8() % 4) as usize;
    match i.u8() % 12 {
        0 => {
            s.types = (0..n).map(|_| BufType(i.u8() as u32 % 7)).collect();
            Pick::Types(s.types.len())
        }
        1 => Pick::RawSize(i.u64() % (16 << 20)),
        2 => Pick::RawAlign(1 << (i.u8() % 20)),
        3 => Pick::Layout(if i.u8() % 2 == 0 { ImageLayout::PitchLinear } else { ImageLayout::BlockLinear }),
        4 => Pick::Scan(if i.u8() % 2 == 0 { ScanType::Progressive } else { ScanType::Interlace }),
        5 => Pick::PlaneCount(i.u8() as u32 % 5),
        6 => {
            s.formats = (0..n).map(|_| ColorFormat(i.u32() % 200)).collect();
            Pick::Formats(s.formats.len())
        }
        7 => {
            s.dims = (0..n).map(|_| i.u32() % 4097).collect();
            Pick::Widths(s.dims.len())
        }
        8 => {
            s.dims = (0..n).map(|_| i.u32() % 4097).collect();
            Pick::Heights(s.dims.len())
        }
        9 => Pick::Cpu(i.u8() % 2 == 0),
        10 => {
            s.pads = (0..n).map(|_| u64::from(i.u8() % 64)).collect();
            Pick::Padding(i.u8() % 4)
        }
        _ => Pick::Perm(if i.u8() % 2 == 0 { Perm::ReadOnly } else { Perm::ReadWrite }),
    }
}

/// The typed attribute a pick stands for.
pub fn attr<'a>(p: &Pick, s: &'a Store) -> BufAttr<'a> {
    match *p {
        Pick::Types(_) => BufAttr::Types(&s.types),
        Pick::RawSize(v) => BufAttr::RawSize(v),
        Pick::RawAlign(v) => BufAttr::RawAlign(v),
        Pick::Layout(v) => BufAttr::Layout(v),
        Pick::Scan(v) => BufAttr::ScanType(v),
        Pick::PlaneCount(v) => BufAttr::PlaneCount(v),
        Pick::Formats(_) => BufAttr::PlaneColorFormat(&s.formats),
        Pick::Widths(_) => BufAttr::PlaneWidth(&s.dims),
        Pick::Heights(_) => BufAttr::PlaneHeight(&s.dims),
        Pick::Cpu(v) => BufAttr::NeedCpuAccess(v),
        Pick::Perm(v) => BufAttr::RequiredPerm(v),
        Pick::Padding(0) => BufAttr::TopPadding(&s.pads),
        Pick::Padding(1) => BufAttr::BottomPadding(&s.pads),
        Pick::Padding(2) => BufAttr::LeftPadding(&s.pads),
        Pick::Padding(_) => BufAttr::RightPadding(&s.pads),
    }
}

/// Any panic, also one the mock catches at its C boundary, is a finding.
pub fn abort_on_panic() {
    std::panic::set_hook(Box::new(|info| {
        eprintln!("{info}");
        std::process::abort();
    }));
}
