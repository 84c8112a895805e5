pub const KEY_VERSION: u32 = 1;
pub fn compute_key() {}
pub fn graphics_key() {}
pub fn module_digest() {}
