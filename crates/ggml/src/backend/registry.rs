//! The process-wide list of compiled backends. Backend crates register themselves at start-up;
//! the CPU backend is kept last whatever the registration order.

use super::{DeviceKind, DeviceRef, Reg};
use std::sync::{Arc, Mutex, RwLock};

static REGS: RwLock<Vec<Arc<dyn Reg>>> = RwLock::new(Vec::new());

/// Backends whose registration waits for the first enumeration. A GPU driver can cost tens of
/// MB and a noticeable fraction of a second just to load (Mesa's lavapipe brings LLVM), which a
/// tool that fails on its arguments or its model file never needs to pay.
type LazyInit = fn() -> Option<Arc<dyn Reg>>;
static PENDING: Mutex<Vec<LazyInit>> = Mutex::new(Vec::new());

/// Adds a backend registration once (by name).
pub fn register(reg: Arc<dyn Reg>) {
    let mut regs = REGS.write().unwrap_or_else(|e| e.into_inner());
    if regs.iter().any(|r| r.name() == reg.name()) {
        return;
    }
    regs.push(reg);
    // keep CPU last: the scheduler's fallback and ggml's enumeration order
    regs.sort_by_key(|r| r.devices().iter().any(|d| d.kind() == DeviceKind::Cpu));
}

/// Queues a backend whose `init` runs on the first call of [`regs`] (or [`devices`]); `None`
/// from it registers nothing (a GPU backend with no device here).
pub fn register_lazy(init: LazyInit) {
    PENDING.lock().unwrap_or_else(|e| e.into_inner()).push(init);
}

fn resolve_pending() {
    // the lock is held while the backends initialise, so a second thread enumerating at the
    // same time waits for them rather than seeing a partial list
    let mut pending = PENDING.lock().unwrap_or_else(|e| e.into_inner());
    for init in pending.drain(..) {
        if let Some(reg) = init() {
            register(reg);
        }
    }
}

pub fn regs() -> Vec<Arc<dyn Reg>> {
    resolve_pending();
    REGS.read().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Every device of every registered backend, CPU last.
pub fn devices() -> Vec<DeviceRef> {
    regs().iter().flat_map(|r| r.devices()).collect()
}

pub fn dev_by_name(name: &str) -> Option<DeviceRef> {
    devices()
        .into_iter()
        .find(|d| d.name().eq_ignore_ascii_case(name))
}
