//! A registry of N fake GPUs (GPU0, GPU1, ...) for tests of multi-device paths such as the
//! meta device, optionally with a communicator of its own for the all-reduce.

use crate::device::{InnerBackendFn, TestDevice, TestDeviceConfig};
use ggml::backend::{Comm, DeviceRef, Reg};
use ggml::Tensor;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// `n` fake GPUs named `{prefix}0..{prefix}{n-1}` whose backends run `inner`'s kernels.
pub fn fake_gpus(prefix: &str, n: usize, inner: InnerBackendFn) -> Vec<Arc<TestDevice>> {
    (0..n)
        .map(|i| {
            TestDevice::new(TestDeviceConfig {
                inner: Some(inner.clone()),
                ..TestDeviceConfig::gpu(&format!("{prefix}{i}"))
            })
        })
        .collect()
}

pub struct FakeReg {
    pub name: String,
    pub devices: Vec<DeviceRef>,
    /// offer a communicator (a host-side f32 sum) through comm_init
    pub with_comm: bool,
    /// all-reduces the communicator performed
    pub comm_calls: Arc<AtomicUsize>,
}

impl FakeReg {
    pub fn new(name: &str, devices: Vec<DeviceRef>, with_comm: bool) -> FakeReg {
        FakeReg {
            name: name.to_string(),
            devices,
            with_comm,
            comm_calls: Arc::default(),
        }
    }
}

impl Reg for FakeReg {
    fn name(&self) -> &str {
        &self.name
    }
    fn devices(&self) -> Vec<DeviceRef> {
        self.devices.clone()
    }
    fn comm_init(&self, _devices: &[DeviceRef]) -> Option<Box<dyn Comm>> {
        self.with_comm.then(|| {
            Box::new(HostComm {
                calls: self.comm_calls.clone(),
            }) as Box<dyn Comm>
        })
    }
}

/// Sums f32 tensors through the host; declines every other type.
struct HostComm {
    calls: Arc<AtomicUsize>,
}

impl Comm for HostComm {
    fn allreduce(&mut self, tensors: &[&Tensor]) -> bool {
        if tensors
            .iter()
            .any(|t| t.ty != ggml::Type::F32 || !t.is_contiguous())
        {
            return false;
        }
        let mut sum = vec![0f32; tensors[0].nelements() as usize];
        for t in tensors {
            let Ok(values) = ggml::backend::tensor_to_f32(t) else {
                return false;
            };
            for (s, v) in sum.iter_mut().zip(values) {
                *s += v;
            }
        }
        for t in tensors {
            if ggml::backend::tensor_set_f32(t, &sum).is_err() {
                return false;
            }
        }
        self.calls.fetch_add(1, Ordering::SeqCst);
        true
    }
}
