//! Cross-process sharing through NvSciIpc: endpoints, and export/import of attribute lists,
//! buffers, sync objects and fences.
//!
//! A multi-process pipeline opens one [`IpcEndpoint`] per connection (its name configured in
//! `/etc/nvsciipc.cfg` on Jetson and DRIVE OS, or in the mock's configuration file), then:
//!
//! 1. the consumer exports its unreconciled lists ([`BufAttrList::export_unreconciled`],
//!    [`SyncAttrList::export_unreconciled`]) and the producer imports them
//!    ([`BufModule::import_unreconciled`]), reconciles them with its own and allocates;
//! 2. the producer exports the reconciled list and each object with the permission it grants
//!    ([`BufObj::export`], [`SyncObj::export`]); the consumer imports them
//!    ([`BufModule::import_reconciled`], [`BufObj::import_read_only`], [`SyncObj::import`]);
//! 3. per frame, fences travel as [`FenceDescriptor`]s ([`Fence::export`],
//!    [`SyncObj::import_fence`]).
//!
//! The frame ring runs these steps for consumers in other processes
//! ([`StreamBuilder::remote_consumer`](crate::pipeline::StreamBuilder::remote_consumer),
//! [`Consumer::connect_with`](crate::pipeline::Consumer::connect_with)).
//! Every descriptor is only valid through the endpoint pair it was exported on.
//!
//! [`BufAttrList::export_unreconciled`]: crate::buf::BufAttrList::export_unreconciled
//! [`SyncAttrList::export_unreconciled`]: crate::sync::SyncAttrList::export_unreconciled
//! [`BufModule::import_unreconciled`]: crate::buf::BufModule::import_unreconciled
//! [`BufModule::import_reconciled`]: crate::buf::BufModule::import_reconciled
//! [`BufObj::export`]: crate::buf::BufObj::export
//! [`BufObj::import_read_only`]: crate::buf::BufObj::import_read_only
//! [`SyncObj::export`]: crate::sync::SyncObj::export
//! [`SyncObj::import`]: crate::sync::SyncObj::import
//! [`SyncObj::import_fence`]: crate::sync::SyncObj::import_fence
//! [`Fence::export`]: crate::sync::Fence::export

mod buf;
mod desc;
mod endpoint;
mod library;
mod list;
mod sync;

pub use buf::ReadOnlyBufObj;
pub use desc::{AttrListDescriptor, BufObjDescriptor, FenceDescriptor, SyncObjDescriptor};
pub(crate) use endpoint::SMALL_MESSAGE;
pub use endpoint::{EndpointInfo, IpcEndpoint, IpcEvents};
pub use library::Ipc;
