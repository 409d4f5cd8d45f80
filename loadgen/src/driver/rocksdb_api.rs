//! The RocksDB C API as a table of function pointers resolved with dlopen at run time:
//! no link-time dependency, so one loadgen drives any version. Required functions must
//! all resolve; optional ones (newer versions) become capabilities.

use anyhow::{anyhow, Context, Result};
use libloading::Library;
use std::ffi::{c_char, c_int, c_uchar, c_void};

/// Every RocksDB handle is an opaque pointer.
pub type H = *mut c_void;
pub type Err = *mut *mut c_char;

macro_rules! api {
    (
        required { $($r:ident : fn($($ra:ty),*) $(-> $rr:ty)?;)* }
        optional { $($o:ident : fn($($oa:ty),*) $(-> $or:ty)?;)* }
    ) => {
        /// The library and its functions, named without the `rocksdb_` prefix.
        #[allow(non_snake_case)]
        pub struct Api {
            $(pub $r: unsafe extern "C" fn($($ra),*) $(-> $rr)?,)*
            $(pub $o: Option<unsafe extern "C" fn($($oa),*) $(-> $or)?>,)*
            /// rocksdb_filterpolicy_create_bloom_full, whose argument type depends on
            /// the version (see `BloomAbi`), so it is kept untyped.
            pub bloom_full: *const c_void,
            _lib: Library,
        }

        impl Api {
            fn resolve(lib: Library, path: &str) -> Result<Api> {
                // SAFETY: each symbol is given the C signature of rocksdb/c.h; the pointers
                // stay valid as long as `_lib`, which the struct owns.
                unsafe {
                    Ok(Api {
                        $($r: *lib.get(concat!("rocksdb_", stringify!($r), "\0").as_bytes())
                            .map_err(|_| missing(stringify!($r), path))?,)*
                        $($o: lib.get(concat!("rocksdb_", stringify!($o), "\0").as_bytes())
                            .ok().map(|s| *s),)*
                        bloom_full: *lib
                            .get::<*const c_void>(b"rocksdb_filterpolicy_create_bloom_full\0")
                            .map_err(|_| missing("filterpolicy_create_bloom_full", path))?,
                        _lib: lib,
                    })
                }
            }
        }
    };
}

fn missing(name: &str, path: &str) -> anyhow::Error {
    anyhow!("{path} lacks the RocksDB C API function rocksdb_{name}, which this loadgen needs")
}

api! {
    required {
        options_create: fn() -> H;
        options_destroy: fn(H);
        options_set_create_if_missing: fn(H, c_uchar);
        options_set_compression: fn(H, c_int);
        options_set_write_buffer_size: fn(H, usize);
        options_set_max_background_jobs: fn(H, c_int);
        options_set_level0_file_num_compaction_trigger: fn(H, c_int);
        options_set_max_bytes_for_level_base: fn(H, u64);
        options_set_target_file_size_base: fn(H, u64);
        options_set_use_direct_reads: fn(H, c_uchar);
        options_set_use_direct_io_for_flush_and_compaction: fn(H, c_uchar);
        options_enable_statistics: fn(H);
        options_statistics_get_string: fn(H) -> *mut c_char;
        options_set_block_based_table_factory: fn(H, H);
        block_based_options_create: fn() -> H;
        block_based_options_destroy: fn(H);
        block_based_options_set_block_size: fn(H, usize);
        block_based_options_set_filter_policy: fn(H, H);
        block_based_options_set_block_cache: fn(H, H);
        cache_create_lru: fn(usize) -> H;
        cache_destroy: fn(H);
        open: fn(H, *const c_char, Err) -> H;
        close: fn(H);
        writebatch_create: fn() -> H;
        writebatch_destroy: fn(H);
        writebatch_clear: fn(H);
        writebatch_put: fn(H, *const c_char, usize, *const c_char, usize);
        write: fn(H, H, H, Err);
        get_pinned: fn(H, H, *const c_char, usize, Err) -> H;
        pinnableslice_value: fn(H, *mut usize) -> *const c_char;
        pinnableslice_destroy: fn(H);
        create_iterator: fn(H, H) -> H;
        iter_destroy: fn(H);
        iter_seek: fn(H, *const c_char, usize);
        iter_seek_for_prev: fn(H, *const c_char, usize);
        iter_valid: fn(H) -> c_uchar;
        iter_next: fn(H);
        iter_prev: fn(H);
        iter_key: fn(H, *mut usize) -> *const c_char;
        iter_value: fn(H, *mut usize) -> *const c_char;
        iter_get_error: fn(H, Err);
        readoptions_create: fn() -> H;
        readoptions_destroy: fn(H);
        writeoptions_create: fn() -> H;
        writeoptions_destroy: fn(H);
        writeoptions_disable_WAL: fn(H, c_int);
        writeoptions_set_sync: fn(H, c_uchar);
        flushoptions_create: fn() -> H;
        flushoptions_destroy: fn(H);
        flushoptions_set_wait: fn(H, c_uchar);
        flush: fn(H, H, Err);
        compactoptions_create: fn() -> H;
        compactoptions_destroy: fn(H);
        compactoptions_set_exclusive_manual_compaction: fn(H, c_uchar);
        compactoptions_set_change_level: fn(H, c_uchar);
        compactoptions_set_target_level: fn(H, c_int);
        compact_range_opt: fn(H, H, *const c_char, usize, *const c_char, usize);
        property_value: fn(H, *const c_char) -> *mut c_char;
        free: fn(*mut c_void);
    }
    optional {
        cache_create_hyper_clock: fn(usize, usize) -> H;
        wait_for_compact: fn(H, H, Err);
        wait_for_compact_options_create: fn() -> H;
        wait_for_compact_options_destroy: fn(H);
        block_based_options_set_block_align: fn(H, c_uchar);
    }
}

// SAFETY: the table holds function pointers into a library that stays loaded; RocksDB's
// C API functions are safe to call from any thread on handles the caller owns.
unsafe impl Send for Api {}
unsafe impl Sync for Api {}

/// How rocksdb_filterpolicy_create_bloom_full takes bits per key: an int before 6.24, a
/// double from 6.24. A wrong guess passes garbage silently, so the spec's version decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BloomAbi {
    Int,
    Double,
}

impl BloomAbi {
    pub fn for_version(v: Version) -> BloomAbi {
        if v >= Version(6, 24, 0) {
            BloomAbi::Double
        } else {
            BloomAbi::Int
        }
    }
}

/// A RocksDB version, major.minor.patch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version(pub u32, pub u32, pub u32);

impl Version {
    pub fn parse(s: &str) -> Result<Version> {
        let parts: Vec<u32> = s
            .split('.')
            .map(|p| p.parse())
            .collect::<Result<_, _>>()
            .with_context(|| format!("RocksDB version {s:?} is not major.minor[.patch]"))?;
        match parts[..] {
            [a, b] => Ok(Version(a, b, 0)),
            [a, b, c] => Ok(Version(a, b, c)),
            _ => Err(anyhow!("RocksDB version {s:?} is not major.minor[.patch]")),
        }
    }
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

impl Api {
    pub fn load(path: &str) -> Result<Api> {
        // SAFETY: loading runs the library's initializers; RocksDB's are benign.
        let lib = unsafe { Library::new(path) }
            .with_context(|| format!("cannot load the RocksDB library {path}"))?;
        Api::resolve(lib, path)
    }

    /// A full bloom filter policy, called with the argument type `abi` says.
    pub fn bloom(&self, bits: f64, abi: BloomAbi) -> H {
        // SAFETY: bloom_full is rocksdb_filterpolicy_create_bloom_full; its signature is
        // (int) or (double) -> policy, chosen by the version.
        unsafe {
            match abi {
                BloomAbi::Int => {
                    let f: unsafe extern "C" fn(c_int) -> H = std::mem::transmute(self.bloom_full);
                    f(bits.round() as c_int)
                }
                BloomAbi::Double => {
                    let f: unsafe extern "C" fn(f64) -> H = std::mem::transmute(self.bloom_full);
                    f(bits)
                }
            }
        }
    }

    /// Take a string RocksDB allocated, freeing it.
    pub fn take_string(&self, p: *mut c_char) -> Option<String> {
        if p.is_null() {
            return None;
        }
        // SAFETY: p is a NUL-terminated string malloc'ed by RocksDB, freed once here.
        let s = unsafe { std::ffi::CStr::from_ptr(p) }
            .to_string_lossy()
            .into_owned();
        unsafe { (self.free)(p.cast()) };
        Some(s)
    }

    /// Turn an errptr filled by a call into a Result.
    pub fn check(&self, err: *mut c_char) -> Result<(), String> {
        match self.take_string(err) {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bloom_takes_a_double_from_6_24() {
        let abi = |s| BloomAbi::for_version(Version::parse(s).unwrap());
        assert_eq!(abi("6.22.1"), BloomAbi::Int);
        assert_eq!(abi("6.23"), BloomAbi::Int);
        assert_eq!(abi("5.18.4"), BloomAbi::Int);
        assert_eq!(abi("6.24.0"), BloomAbi::Double);
        assert_eq!(abi("6.29.5"), BloomAbi::Double);
        assert_eq!(abi("10.2.1"), BloomAbi::Double);
    }

    #[test]
    fn versions_parse_and_order() {
        assert_eq!(Version::parse("8.7").unwrap(), Version(8, 7, 0));
        assert!(Version::parse("8.11.4").unwrap() > Version::parse("8.7").unwrap());
        assert!(Version::parse("8.x").is_err());
        assert!(Version::parse("8").is_err());
    }

    #[test]
    fn a_missing_library_is_named() {
        let e = Api::load("/nonexistent/librocksdb.so").err().unwrap();
        assert!(format!("{e:#}").contains("/nonexistent/librocksdb.so"));
    }
}
