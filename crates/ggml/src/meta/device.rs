//! The meta device: one device that is N real devices, answering every question by
//! delegation (supports_op: all of them; memory: the sum; caps: all of them).

use super::backend::MetaBackend;
use super::buffer::MetaBufferType;
use super::rules::StaticSplitFn;
use crate::backend::{
    same_buft, Backend, BackendError, BufferTypeRef, Device, DeviceCaps, DeviceKind, DeviceRef,
};
use crate::context::Context;
use crate::tensor::TensorId;
use std::sync::{Arc, Mutex, Weak};

pub struct MetaDevice {
    devs: Vec<DeviceRef>,
    name: String,
    description: String,
    buft: Arc<MetaBufferType>,
}

static META_BUFTS: Mutex<Vec<Weak<MetaBufferType>>> = Mutex::new(Vec::new());

/// The meta buffer type behind a buffer type reference, if it is one.
pub fn as_meta_buft(b: &BufferTypeRef) -> Option<Arc<MetaBufferType>> {
    let list = META_BUFTS.lock().unwrap_or_else(|e| e.into_inner());
    list.iter().filter_map(Weak::upgrade).find(|m| {
        let r: BufferTypeRef = m.clone();
        same_buft(&r, b)
    })
}

/// ggml_backend_meta_device: a device over `devs` whose statically allocated tensors are split
/// as `split` says.
/// The name and description of the meta device over `devs`: "Meta(" and the members' own,
/// comma-separated. (The pinned ggml means the same but prints "Meta()": its constructor reads
/// the vector it has just moved from.)
pub fn meta_names(devs: &[DeviceRef]) -> (String, String) {
    let join = |f: &dyn Fn(&DeviceRef) -> String| {
        let v: Vec<String> = devs.iter().map(f).collect();
        format!("Meta({})", v.join(","))
    };
    (
        join(&|d| d.name().to_string()),
        join(&|d| d.description().to_string()),
    )
}

pub fn meta_device(devs: Vec<DeviceRef>, split: Arc<StaticSplitFn>) -> Arc<MetaDevice> {
    let (name, description) = meta_names(&devs);
    let simple: Vec<BufferTypeRef> = devs.iter().map(|d| d.buffer_type()).collect();
    let buft_name = {
        let v: Vec<&str> = simple.iter().map(|b| b.name()).collect();
        format!("Meta({})", v.join(","))
    };
    let buft = Arc::new(MetaBufferType {
        name: buft_name,
        simple,
        split,
    });
    let mut list = META_BUFTS.lock().unwrap_or_else(|e| e.into_inner());
    list.retain(|w| w.strong_count() > 0);
    list.push(Arc::downgrade(&buft));
    Arc::new(MetaDevice {
        devs,
        name,
        description,
        buft,
    })
}

impl MetaDevice {
    pub fn n_devs(&self) -> usize {
        self.devs.len()
    }
    pub fn simple_devs(&self) -> &[DeviceRef] {
        &self.devs
    }
    pub fn meta_buft(&self) -> &Arc<MetaBufferType> {
        &self.buft
    }
}

impl Device for MetaDevice {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn kind(&self) -> DeviceKind {
        // the scheduler and libllama treat it as the accelerator it stands for
        DeviceKind::Gpu
    }
    fn memory(&self) -> (usize, usize) {
        self.devs.iter().fold((0, 0), |(f, t), d| {
            let (df, dt) = d.memory();
            (f + df, t + dt)
        })
    }
    fn caps(&self) -> DeviceCaps {
        let mut c = DeviceCaps {
            async_: true,
            // not implemented for the meta device, whatever the members offer
            host_buffer: false,
            buffer_from_host_ptr: false,
            events: false,
        };
        for d in &self.devs {
            let dc = d.caps();
            c.async_ &= dc.async_;
            c.host_buffer &= dc.host_buffer;
            c.buffer_from_host_ptr &= dc.buffer_from_host_ptr;
            c.events &= dc.events;
        }
        c
    }
    fn init_backend(self: Arc<Self>) -> Result<Box<dyn Backend>, BackendError> {
        Ok(Box::new(MetaBackend::new(self)?))
    }
    fn buffer_type(&self) -> BufferTypeRef {
        self.buft.clone()
    }
    /// The members' pinned host memory where they all share one type (ggml: the host buffer
    /// type of the meta device, so outputs and CPU compute buffers stay pinned), else none.
    fn host_buffer_type(&self) -> Option<BufferTypeRef> {
        let mut host: Option<BufferTypeRef> = None;
        for d in &self.devs {
            let h = d.host_buffer_type()?;
            match &host {
                None => host = Some(h),
                Some(prev) if !same_buft(prev, &h) => return None,
                Some(_) => {}
            }
        }
        host
    }
    fn supports_op(&self, ctx: &Context, op: TensorId) -> bool {
        self.devs.iter().all(|d| d.supports_op(ctx, op))
    }
    fn supports_buft(&self, buft: &BufferTypeRef) -> bool {
        as_meta_buft(buft).is_some_and(|m| {
            m.simple.len() == self.buft.simple.len()
                && m.simple
                    .iter()
                    .zip(&self.buft.simple)
                    .all(|(a, b)| same_buft(a, b))
        })
    }
}
