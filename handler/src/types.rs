//! The values that cross `wit/storage.wit`, as plain Rust types.
//!
//! Each mirrors the WIT type of the same name (see the comments there). The
//! guest's `wit-bindgen` types and the host's `wasmtime` bindgen types both
//! convert to and from these through [`crate::wit_conversions!`].

/// Everything the index knows about one stored file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    pub path: String,
    pub size: u64,
    pub sha256: String,
    pub blake3: Option<String>,
    pub content_type: String,
    pub created_ms: i64,
    pub modified_ms: i64,
    /// Which version of the path this is (`null` where none are kept).
    pub version_id: String,
}

/// One row of a listing: a file, or a folder that holds more files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    File(FileMeta),
    Folder(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing {
    pub entries: Vec<Entry>,
    pub next_after: Option<String>,
}

/// Why the volume refused an operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeError {
    NotFound,
    AlreadyExists,
    NoSpace,
    InvalidPath(String),
    Busy(String),
    QuotaExceeded(String),
    Internal(String),
}

/// Why a body could not move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    TooLarge(u64),
    Aborted(String),
    TimedOut(String),
    NoSpace,
    Internal(String),
    Corrupt(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreRequest {
    pub path: String,
    pub content_type: Option<String>,
    pub create_only: bool,
    pub window: u64,
}

/// Where a resumable upload's file ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileEnd {
    /// Where this request's body ends (a whole upload).
    BodyEnd,
    /// At this length: the file is stored when the body ends there.
    At(u64),
    /// Not known yet: the body ends before it.
    Later,
}

/// One request's share of a resumable upload: where its bytes start (the
/// hashes' state there), what the file is, and how often to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppendRequest {
    /// The file, stored once the last byte is in.
    pub store: StoreRequest,
    /// The hashes where the last request left them; the body's first byte
    /// is the content's byte `resume.offset()`.
    pub resume: crate::hashes::HashState,
    /// Where the file ends.
    pub ends: FileEnd,
    /// The file's first bytes, up to 4 KiB, when the body starts past them.
    pub head: Vec<u8>,
    /// Hand the host a state to record every this many bytes; 0: never.
    pub checkpoint_every: u64,
}

/// A byte range as the client asked for it, not yet checked against the size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteRange {
    /// `bytes=first-` or `bytes=first-last` (inclusive).
    FirstLast((u64, Option<u64>)),
    /// `bytes=-n`: the last n bytes.
    Suffix(u64),
}

/// `If-Range`: what a ranged read's validator names (see [`crate::range::if_range_holds`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IfRange {
    /// A strong entity tag, without quotes.
    EntityTag(String),
    /// An HTTP-date, in seconds since the Unix epoch.
    Date(i64),
    /// A weak tag or an unreadable validator: never matches.
    Never,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchRequest {
    pub path: String,
    pub want_body: bool,
    pub range: Option<ByteRange>,
    pub if_range: Option<IfRange>,
    pub if_none_match: Vec<String>,
    pub window: u64,
}

/// What `fetch` prepared for `send-body`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchBody {
    None,
    NotModified,
    Full,
    Partial((u64, u64)),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub meta: FileMeta,
    pub body: FetchBody,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HandlerError {
    Volume(VolumeError),
    Body(BodyError),
    Integrity(String),
    RangeNotSatisfiable(u64),
}

/// A `FileMeta` of type `$to` (these types', either WIT generator's, the
/// volume's) made from `$meta`, a `FileMeta` of another of them, with
/// `$extra` fields that `$to` has beyond the WIT type's: the one list of
/// its fields, for every conversion that copies them.
#[macro_export]
macro_rules! file_meta {
    ($to:path, $meta:expr $(, $extra:ident: $value:expr)* $(,)?) => {{
        let meta = $meta;
        $to {
            path: meta.path,
            size: meta.size,
            sha256: meta.sha256,
            blake3: meta.blake3,
            content_type: meta.content_type,
            created_ms: meta.created_ms,
            modified_ms: meta.modified_ms,
            version_id: meta.version_id,
            $($extra: $value,)*
        }
    }};
}

/// `From` both ways between the enums `$a` and `$b`, which have the same
/// `$variant`s, each bare or with one value (`.into` after it: converted
/// too): the variants listed once, for [`wit_conversions!`].
#[doc(hidden)]
#[macro_export]
macro_rules! same_variants {
    ($a:ty, $b:ty, [$($variant:ident $(($value:ident $(.$into:ident)?))?),+ $(,)?]) => {
        impl From<$a> for $b {
            fn from(value: $a) -> Self {
                type Other = $a;
                match value {
                    $(Other::$variant $(($value))? => Self::$variant $(($value $(.$into())?))?,)+
                }
            }
        }

        impl From<$b> for $a {
            fn from(value: $b) -> Self {
                type Other = $b;
                match value {
                    $(Other::$variant $(($value))? => Self::$variant $(($value $(.$into())?))?,)+
                }
            }
        }
    };
}

/// Converts between these types and the bindings a WIT generator made from
/// `wit/storage.wit`, both ways. Invoke it where three modules are in
/// scope under these names: `wit_types` (the `types` interface),
/// `wit_body` (`body`) and `wit_handler` (the exported `handler`). The guest
/// and the host each invoke it once, so the mapping is written once.
#[macro_export]
macro_rules! wit_conversions {
    () => {
        impl From<wit_types::FileMeta> for $crate::types::FileMeta {
            fn from(meta: wit_types::FileMeta) -> Self {
                $crate::file_meta!(Self, meta)
            }
        }

        impl From<$crate::types::FileMeta> for wit_types::FileMeta {
            fn from(meta: $crate::types::FileMeta) -> Self {
                $crate::file_meta!(Self, meta)
            }
        }

        $crate::same_variants!(
            wit_types::Entry,
            $crate::types::Entry,
            [File(meta.into), Folder(prefix)]
        );

        impl From<wit_types::Listing> for $crate::types::Listing {
            fn from(listing: wit_types::Listing) -> Self {
                let entries = listing.entries.into_iter().map(Into::into).collect();
                Self {
                    entries,
                    next_after: listing.next_after,
                }
            }
        }

        impl From<$crate::types::Listing> for wit_types::Listing {
            fn from(listing: $crate::types::Listing) -> Self {
                let entries = listing.entries.into_iter().map(Into::into).collect();
                Self {
                    entries,
                    next_after: listing.next_after,
                }
            }
        }

        $crate::same_variants!(
            wit_types::VolumeError,
            $crate::types::VolumeError,
            [
                NotFound,
                AlreadyExists,
                NoSpace,
                InvalidPath(why),
                Busy(why),
                QuotaExceeded(why),
                Internal(why),
            ]
        );

        $crate::same_variants!(
            wit_body::BodyError,
            $crate::types::BodyError,
            [
                TooLarge(limit),
                Aborted(why),
                TimedOut(why),
                NoSpace,
                Internal(why),
                Corrupt(why),
            ]
        );

        impl From<wit_body::HashState> for $crate::hashes::HashState {
            fn from(state: wit_body::HashState) -> Self {
                let mut sha256 = [0; 8];
                for (word, given) in sha256.iter_mut().zip(state.sha256) {
                    *word = given;
                }
                Self {
                    groups: state.groups,
                    sha256,
                    stack: state
                        .stack
                        .chunks_exact(32)
                        .filter_map(|value| value.try_into().ok())
                        .collect(),
                }
            }
        }

        impl From<&$crate::hashes::HashState> for wit_body::HashState {
            fn from(state: &$crate::hashes::HashState) -> Self {
                Self {
                    groups: state.groups,
                    sha256: state.sha256.to_vec(),
                    stack: state.stack.iter().flatten().copied().collect(),
                }
            }
        }

        $crate::same_variants!(
            wit_handler::FileEnd,
            $crate::types::FileEnd,
            [BodyEnd, At(length), Later]
        );

        impl From<wit_handler::AppendRequest> for $crate::types::AppendRequest {
            fn from(request: wit_handler::AppendRequest) -> Self {
                Self {
                    store: request.store.into(),
                    resume: request.resume.into(),
                    ends: request.ends.into(),
                    head: request.head,
                    checkpoint_every: request.checkpoint_every,
                }
            }
        }

        impl From<$crate::types::AppendRequest> for wit_handler::AppendRequest {
            fn from(request: $crate::types::AppendRequest) -> Self {
                Self {
                    store: request.store.into(),
                    resume: (&request.resume).into(),
                    ends: request.ends.into(),
                    head: request.head,
                    checkpoint_every: request.checkpoint_every,
                }
            }
        }

        impl From<wit_handler::StoreRequest> for $crate::types::StoreRequest {
            fn from(request: wit_handler::StoreRequest) -> Self {
                Self {
                    path: request.path,
                    content_type: request.content_type,
                    create_only: request.create_only,
                    window: request.window,
                }
            }
        }

        impl From<wit_handler::FetchRequest> for $crate::types::FetchRequest {
            fn from(request: wit_handler::FetchRequest) -> Self {
                use $crate::types::{ByteRange, IfRange};
                Self {
                    path: request.path,
                    want_body: request.want_body,
                    range: request.range.map(|range| match range {
                        wit_handler::ByteRange::FirstLast(bounds) => ByteRange::FirstLast(bounds),
                        wit_handler::ByteRange::Suffix(length) => ByteRange::Suffix(length),
                    }),
                    if_range: request.if_range.map(|validator| match validator {
                        wit_handler::IfRange::EntityTag(tag) => IfRange::EntityTag(tag),
                        wit_handler::IfRange::Date(seconds) => IfRange::Date(seconds),
                        wit_handler::IfRange::Never => IfRange::Never,
                    }),
                    if_none_match: request.if_none_match,
                    window: request.window,
                }
            }
        }

        impl From<$crate::types::Fetched> for wit_handler::Fetched {
            fn from(fetched: $crate::types::Fetched) -> Self {
                use $crate::types::FetchBody as Plain;
                Self {
                    meta: fetched.meta.into(),
                    body: match fetched.body {
                        Plain::None => wit_handler::FetchBody::None,
                        Plain::NotModified => wit_handler::FetchBody::NotModified,
                        Plain::Full => wit_handler::FetchBody::Full,
                        Plain::Partial(bounds) => wit_handler::FetchBody::Partial(bounds),
                    },
                }
            }
        }

        impl From<$crate::types::StoreRequest> for wit_handler::StoreRequest {
            fn from(request: $crate::types::StoreRequest) -> Self {
                Self {
                    path: request.path,
                    content_type: request.content_type,
                    create_only: request.create_only,
                    window: request.window,
                }
            }
        }

        impl From<$crate::types::FetchRequest> for wit_handler::FetchRequest {
            fn from(request: $crate::types::FetchRequest) -> Self {
                use $crate::types::{ByteRange, IfRange};
                Self {
                    path: request.path,
                    want_body: request.want_body,
                    range: request.range.map(|range| match range {
                        ByteRange::FirstLast(bounds) => wit_handler::ByteRange::FirstLast(bounds),
                        ByteRange::Suffix(length) => wit_handler::ByteRange::Suffix(length),
                    }),
                    if_range: request.if_range.map(|validator| match validator {
                        IfRange::EntityTag(tag) => wit_handler::IfRange::EntityTag(tag),
                        IfRange::Date(seconds) => wit_handler::IfRange::Date(seconds),
                        IfRange::Never => wit_handler::IfRange::Never,
                    }),
                    if_none_match: request.if_none_match,
                    window: request.window,
                }
            }
        }

        impl From<wit_handler::Fetched> for $crate::types::Fetched {
            fn from(fetched: wit_handler::Fetched) -> Self {
                use $crate::types::FetchBody as Plain;
                Self {
                    meta: fetched.meta.into(),
                    body: match fetched.body {
                        wit_handler::FetchBody::None => Plain::None,
                        wit_handler::FetchBody::NotModified => Plain::NotModified,
                        wit_handler::FetchBody::Full => Plain::Full,
                        wit_handler::FetchBody::Partial(bounds) => Plain::Partial(bounds),
                    },
                }
            }
        }

        impl From<wit_handler::HandlerError> for $crate::types::HandlerError {
            fn from(error: wit_handler::HandlerError) -> Self {
                use wit_handler::HandlerError as Wit;
                match error {
                    Wit::Volume(error) => Self::Volume(error.into()),
                    Wit::Body(error) => Self::Body(error.into()),
                    Wit::Integrity(why) => Self::Integrity(why),
                    Wit::RangeNotSatisfiable(size) => Self::RangeNotSatisfiable(size),
                }
            }
        }

        impl From<$crate::types::HandlerError> for wit_handler::HandlerError {
            fn from(error: $crate::types::HandlerError) -> Self {
                use $crate::types::HandlerError as Plain;
                match error {
                    Plain::Volume(error) => Self::Volume(error.into()),
                    Plain::Body(error) => Self::Body(error.into()),
                    Plain::Integrity(why) => Self::Integrity(why),
                    Plain::RangeNotSatisfiable(size) => Self::RangeNotSatisfiable(size),
                }
            }
        }
    };
}
