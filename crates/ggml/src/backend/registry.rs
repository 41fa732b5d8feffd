//! The process-wide list of compiled backends. Backend crates register themselves at start-up;
//! the CPU backend is kept last whatever the registration order.

use super::{DeviceKind, DeviceRef, Reg};
use std::sync::{Arc, RwLock};

static REGS: RwLock<Vec<Arc<dyn Reg>>> = RwLock::new(Vec::new());

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

pub fn regs() -> Vec<Arc<dyn Reg>> {
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
