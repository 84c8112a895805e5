//! Feature structures made from their `sType`s and `VkBool32`s (every `*Features` structure is
//! `sType`, `pNext`, then `VkBool32`s), each in a buffer of its own, 8-byte aligned, chained in
//! order: for the driver to fill (`vkGetPhysicalDeviceFeatures2`) or to read (`vkCreateDevice`).
//! One place for the raw layout, whatever the pointer size (the head is 16 bytes on a 64-bit
//! target, 8 on a 32-bit one).

use crate::key::features::HEAD;

/// A chain of feature structures, living as long as this.
pub struct FeatureChain {
    buffers: Vec<Vec<u64>>,
}

impl FeatureChain {
    /// The structures `features` names, each holding its values, chained in order.
    pub fn new(features: &[(i32, Vec<u32>)]) -> FeatureChain {
        let mut buffers: Vec<Vec<u64>> = features
            .iter()
            .map(|(_, values)| vec![0u64; (HEAD + 4 * values.len()).div_ceil(8)])
            .collect();
        let mut next: *mut std::ffi::c_void = std::ptr::null_mut();
        for ((stype, values), buf) in features.iter().zip(buffers.iter_mut()).rev() {
            let base = buf.as_mut_ptr() as *mut u8;
            // SAFETY: `buf` holds the head (sType at 0, pNext at its second half) and then room
            // for every value, 8-byte aligned.
            unsafe {
                (base as *mut i32).write(*stype);
                (base.add(HEAD / 2) as *mut *mut std::ffi::c_void).write(next);
                std::ptr::copy_nonoverlapping(
                    values.as_ptr(),
                    base.add(HEAD) as *mut u32,
                    values.len(),
                );
            }
            next = base.cast();
        }
        FeatureChain { buffers }
    }

    /// The first structure, for a `pNext`; NULL for an empty chain.
    pub fn head(&self) -> *mut std::ffi::c_void {
        self.buffers.first().map_or(std::ptr::null_mut(), |b| {
            b.as_ptr() as *mut std::ffi::c_void
        })
    }

    /// The first `count` `VkBool32`s of the `index`th structure, as they stand now.
    pub fn values(&self, index: usize, count: usize) -> Vec<u32> {
        let buf = &self.buffers[index];
        assert!(HEAD + 4 * count <= buf.len() * 8, "within the structure");
        // SAFETY: within the buffer (asserted above).
        (0..count)
            .map(|i| unsafe {
                (buf.as_ptr() as *const u8)
                    .add(HEAD + 4 * i)
                    .cast::<u32>()
                    .read()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_holds_each_structures_values_behind_its_head_and_links_them_in_order() {
        let chain = FeatureChain::new(&[(7, vec![1, 0, 1]), (9, vec![0])]);
        assert_eq!(chain.values(0, 3), [1, 0, 1]);
        assert_eq!(chain.values(1, 1), [0]);
        let first = chain.head() as *const vk_head::Base;
        // SAFETY: the chain's own buffers.
        unsafe {
            assert_eq!((*first).s_type, 7);
            let second = (*first).p_next;
            assert_eq!((*second).s_type, 9);
            assert!((*second).p_next.is_null());
        }
        assert!(FeatureChain::new(&[]).head().is_null());
    }

    mod vk_head {
        #[repr(C)]
        pub struct Base {
            pub s_type: i32,
            pub p_next: *const Base,
        }
    }
}
