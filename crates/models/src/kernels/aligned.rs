//! Buffers whose values start on a cache line, for what the AMX tiles load.
//!
//! A tile row is 64 bytes; from a buffer that `Vec` placed 16 or 48 bytes past a line, every
//! row straddles two lines and costs two loads. Measured at OmniVoice's linear shapes on an
//! AMX Xeon, that alone halved the product's rate (240 against 450 G multiply-adds a second).

use std::ops::{Deref, DerefMut};

/// Bytes of a cache line.
const LINE: usize = 64;

/// `len` values of `T`, zeroed (`T::default()`), the first on a cache line.
pub(super) struct Aligned<T> {
    values: Vec<T>,
    skip: usize,
    len: usize,
}

impl<T> Aligned<T> {
    /// No values, without allocating (for a `const` thread-local).
    pub(super) const fn new() -> Self {
        Self {
            values: Vec::new(),
            skip: 0,
            len: 0,
        }
    }
}

impl<T: Copy + Default> Aligned<T> {
    pub(super) fn zeroed(len: usize) -> Self {
        let slack = LINE / std::mem::size_of::<T>().max(1);
        let values = vec![T::default(); len + slack];
        let skip = values.as_ptr().align_offset(LINE);
        assert!(skip <= slack, "a cache line holds whole values of T");
        Self { values, skip, len }
    }

    /// The first `len` values, reallocated (zeroed) only when fewer are held: a buffer kept
    /// between calls, its values whatever the last call left.
    pub(super) fn at_least(&mut self, len: usize) -> &mut [T] {
        if self.values.len() < self.skip + len {
            *self = Self::zeroed(len);
        }
        self.len = len;
        &mut self.values[self.skip..][..len]
    }

    pub(super) fn copy(values: &[T]) -> Self {
        let mut aligned = Self::zeroed(values.len());
        aligned.copy_from_slice(values);
        aligned
    }
}

impl<T> Deref for Aligned<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        &self.values[self.skip..][..self.len]
    }
}

impl<T> DerefMut for Aligned<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.values[self.skip..][..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_on_a_line_and_holds_what_was_asked() {
        for len in [0, 1, 15, 16, 1000] {
            let zeros = Aligned::<u16>::zeroed(len);
            assert_eq!(zeros.as_ptr() as usize % LINE, 0);
            assert_eq!(zeros.len(), len);
            assert!(zeros.iter().all(|&v| v == 0));
            let values: Vec<u32> = (0..len as u32).collect();
            let copy = Aligned::copy(&values);
            assert_eq!(copy.as_ptr() as usize % LINE, 0);
            assert_eq!(&copy[..], &values[..]);
        }
        let mut kept = Aligned::<u32>::new();
        kept.at_least(100).fill(7);
        let first = kept.as_ptr();
        // Fewer values: the same allocation, the old values.
        assert_eq!(kept.at_least(50), &[7; 50][..]);
        assert_eq!(kept.as_ptr(), first);
        assert_eq!(kept.at_least(5000).len(), 5000);
        assert_eq!(kept.as_ptr() as usize % LINE, 0);
    }
}
