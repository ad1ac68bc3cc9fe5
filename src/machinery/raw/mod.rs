//! The machinery's unsafe corner: descriptors, slots and reclamation.
//! Every `unsafe` block of the machinery layer lives here.

pub(crate) mod descriptor;
pub(crate) mod durable;
pub(crate) mod reclaim;
pub(crate) mod slots;
