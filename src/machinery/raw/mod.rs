//! The machinery's unsafe corner: descriptors, slots, the durable record,
//! reclamation, and the plain types' views of their generic forms.
//!
//! The boundary: every `unsafe` block and `unsafe impl` of the machinery
//! layer lives in this folder, and each one carries a `// SAFETY:` comment
//! (`clippy::undocumented_unsafe_blocks` is denied crate-wide). What these
//! modules hand out is safe to call: the descriptor cell and the durable
//! record load their pointers under an epoch guard they take themselves, a
//! session's retired descriptors are lent by `&mut` (`SessionRetired`). The
//! `unsafe fn`s handed out are the reclaimer's (`RetireBatch::push`,
//! `free_now`), public through `machinery::epoch` for storage built on the
//! machinery, with their contracts under `# Safety`. `lockfree/`, `txn/`, `manager.rs` and the rest of the
//! machinery hold no `unsafe`.

pub(crate) mod all_durable;
pub(crate) mod descriptor;
pub(crate) mod plain;
pub(crate) mod reclaim;
pub(crate) mod slots;
