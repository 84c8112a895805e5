//! Feeding what a create info means into BLAKE3, in a defined order: every value little-endian
//! at a fixed width, every list prefixed by its length, every optional part by a presence byte,
//! every byte string by its length. So no two different inputs feed the same bytes (the D113
//! lesson: a short input never reads as zero padding of a longer one).

/// A BLAKE3 hasher that takes values, never raw struct bytes. Values gather in a small buffer
/// that is hashed a block at a time: a key is hundreds of four-byte values, and handing each to
/// the hasher alone cost more than the hashing (the digest is the same either way: BLAKE3 hashes
/// a stream, whatever the pieces it came in).
pub struct KeyWriter {
    hasher: blake3::Hasher,
    pending: [u8; PENDING],
    len: usize,
}

/// Bytes gathered before they are hashed: a few of BLAKE3's 64-byte blocks.
const PENDING: usize = 512;

impl KeyWriter {
    /// A writer for one kind of hash, named by `domain` so no two kinds can collide.
    pub fn new(domain: &str) -> KeyWriter {
        let mut w = KeyWriter {
            hasher: blake3::Hasher::new(),
            pending: [0; PENDING],
            len: 0,
        };
        w.bytes(domain.as_bytes());
        w
    }

    fn put(&mut self, b: &[u8]) {
        if self.len + b.len() > PENDING {
            self.hasher.update(&self.pending[..self.len]);
            self.len = 0;
            if b.len() > PENDING {
                self.hasher.update(b);
                return;
            }
        }
        self.pending[self.len..self.len + b.len()].copy_from_slice(b);
        self.len += b.len();
    }

    pub fn u32(&mut self, v: u32) {
        self.put(&v.to_le_bytes());
    }

    pub fn u64(&mut self, v: u64) {
        self.put(&v.to_le_bytes());
    }

    /// A length-prefixed byte string.
    pub fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.put(b);
    }

    pub fn digest(&mut self, d: &Digest) {
        self.put(&d.0);
    }

    pub fn finish(mut self) -> Digest {
        self.hasher.update(&self.pending[..self.len]);
        Digest(*self.hasher.finalize().as_bytes())
    }
}

/// A 256-bit content digest of one tracked object (a module, a layout, a sampler, a render pass).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Digest(pub [u8; 32]);

impl Digest {
    /// No object where Vulkan allows none: a pipeline with no layout of its own (a library part
    /// of vertex input or fragment output), no render pass, a set layout left `VK_NULL_HANDLE` in
    /// a layout made with `INDEPENDENT_SETS` (DXVK's shader libraries). No content hashes to it.
    pub const NONE: Digest = Digest([0; 32]);

    /// The first 128 bits, as a key half.
    pub fn half(&self) -> [u8; 16] {
        self.0[..16].try_into().expect("16 bytes")
    }
}

/// Something that can be fed into a [`KeyWriter`].
pub trait Feed {
    fn feed(&self, w: &mut KeyWriter);
}

impl Feed for u32 {
    fn feed(&self, w: &mut KeyWriter) {
        w.u32(*self);
    }
}

impl Feed for i32 {
    fn feed(&self, w: &mut KeyWriter) {
        w.u32(*self as u32);
    }
}

impl Feed for bool {
    fn feed(&self, w: &mut KeyWriter) {
        w.u32(u32::from(*self));
    }
}

/// Floats by their bits: `-0.0` and `0.0` then differ, which costs at most a miss.
impl Feed for f32 {
    fn feed(&self, w: &mut KeyWriter) {
        w.u32(self.to_bits());
    }
}

impl Feed for Digest {
    fn feed(&self, w: &mut KeyWriter) {
        w.digest(self);
    }
}

impl<T: Feed> Feed for [T] {
    fn feed(&self, w: &mut KeyWriter) {
        w.u64(self.len() as u64);
        for v in self {
            v.feed(w);
        }
    }
}

impl<T: Feed> Feed for Vec<T> {
    fn feed(&self, w: &mut KeyWriter) {
        self.as_slice().feed(w);
    }
}

impl<T: Feed, const N: usize> Feed for [T; N] {
    fn feed(&self, w: &mut KeyWriter) {
        for v in self {
            v.feed(w);
        }
    }
}

impl<T: Feed> Feed for Option<T> {
    fn feed(&self, w: &mut KeyWriter) {
        match self {
            None => w.u32(0),
            Some(v) => {
                w.u32(1);
                v.feed(w);
            }
        }
    }
}

/// Implements [`Feed`] for a struct by feeding the named fields in the order given.
macro_rules! feed_fields {
    ($ty:ty { $($field:ident),* $(,)? }) => {
        impl $crate::key::feed::Feed for $ty {
            fn feed(&self, w: &mut $crate::key::feed::KeyWriter) {
                $( $crate::key::feed::Feed::feed(&self.$field, w); )*
            }
        }
    };
}
pub(crate) use feed_fields;

#[cfg(test)]
mod tests {
    use super::*;

    fn hash_of(f: impl Fn(&mut KeyWriter)) -> Digest {
        let mut w = KeyWriter::new("test");
        f(&mut w);
        w.finish()
    }

    #[test]
    fn short_and_odd_length_inputs_are_never_equal_by_accident() {
        // A read past the end answering zero would make these equal (D113).
        let a = hash_of(|w| w.bytes(&[1]));
        let b = hash_of(|w| w.bytes(&[1, 0]));
        let c = hash_of(|w| w.bytes(&[1, 0, 0, 0]));
        let empty = hash_of(|w| w.bytes(&[]));
        let zero = hash_of(|w| w.bytes(&[0]));
        let all = [a, b, c, empty, zero];
        for i in 0..all.len() {
            for j in 0..i {
                assert_ne!(all[i], all[j], "{i} and {j}");
            }
        }
        // Two lists split differently never feed the same bytes.
        let split1 = hash_of(|w| {
            vec![1u32, 2].feed(w);
            vec![3u32].feed(w);
        });
        let split2 = hash_of(|w| {
            vec![1u32].feed(w);
            vec![2u32, 3].feed(w);
        });
        assert_ne!(split1, split2);
        assert_ne!(
            hash_of(|w| None::<u32>.feed(w)),
            hash_of(|w| Some(0u32).feed(w))
        );
    }
}
