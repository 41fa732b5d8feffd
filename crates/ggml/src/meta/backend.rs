//! The meta backend: N real backends. graph_compute issues each subgraph of the plan on every
//! device, then all-reduces its last node; the plan is rebuilt only when the graph changes.

use super::device::MetaDevice;
use super::plan::{build_plan, graph_uid, Plan};
use super::reduce::{allreduce_fallback, n_reduce_steps, ReduceStep, TmpBuffers};
use super::rules::{MetaError, StateCache};
use crate::backend::{regs, Backend, BackendError, Comm, DeviceRef, GraphView, Status};
use crate::tensor::Tensor;
use std::sync::Arc;

/// What one all-reduce did, for GGML_META_DEBUG and tests.
#[derive(Clone, Debug)]
pub struct ReduceRecord {
    pub node: String,
    /// true: the backend's own communicator did it
    pub comm: bool,
    pub steps: Vec<ReduceStep>,
}

pub struct MetaBackend {
    dev: Arc<MetaDevice>,
    name: String,
    backends: Vec<Box<dyn Backend>>,
    comm: Option<Box<dyn Comm>>,
    cache: StateCache,
    plan: Option<Plan>,
    tmp: TmpBuffers,
    /// plans built so far (a reused plan does not count)
    pub n_builds: usize,
    /// the reduces of the last graph_compute
    pub last_reduces: Vec<ReduceRecord>,
}

fn find_comm(devs: &[DeviceRef]) -> Option<Box<dyn Comm>> {
    let first = devs.first()?;
    let reg = regs().into_iter().find(|r| {
        r.devices()
            .iter()
            .any(|d| std::ptr::addr_eq(Arc::as_ptr(d), Arc::as_ptr(first)))
    })?;
    reg.comm_init(devs)
}

impl MetaBackend {
    pub fn new(dev: Arc<MetaDevice>) -> Result<MetaBackend, BackendError> {
        let mut backends = Vec::with_capacity(dev.n_devs());
        for d in dev.simple_devs() {
            backends.push(d.clone().init_backend()?);
        }
        let comm = if backends.len() > 1 {
            find_comm(dev.simple_devs())
        } else {
            None
        };
        Ok(MetaBackend::with_backends(dev, backends, comm))
    }

    /// A meta backend over backends made by the caller (one per member device, in order).
    pub fn with_backends(
        dev: Arc<MetaDevice>,
        backends: Vec<Box<dyn Backend>>,
        comm: Option<Box<dyn Comm>>,
    ) -> MetaBackend {
        let names: Vec<&str> = backends.iter().map(|b| b.name()).collect();
        let name = format!("Meta({})", names.join(","));
        MetaBackend {
            dev,
            name,
            backends,
            comm,
            cache: StateCache::new(),
            plan: None,
            tmp: TmpBuffers::default(),
            n_builds: 0,
            last_reduces: Vec::new(),
        }
    }

    pub fn n_backends(&self) -> usize {
        self.backends.len()
    }
    pub fn plan(&self) -> Option<&Plan> {
        self.plan.as_ref()
    }

    fn compute(&mut self, graph: GraphView<'_>) -> Result<(), MetaError> {
        let n = self.backends.len();
        let uid = graph_uid(graph.ctx, graph.nodes);
        if self.plan.as_ref().is_none_or(|p| p.uid != uid) {
            let split = self.dev.meta_buft().split.clone();
            let plan = build_plan(graph.ctx, graph.nodes, n, split.as_ref(), &mut self.cache)?;
            self.n_builds += 1;
            self.plan = Some(plan);
        }
        let plan = self.plan.as_ref().expect("plan built above");
        let debug = self.cache.debug;
        self.last_reduces.clear();
        for (k, sg) in plan.subgraphs.iter().enumerate() {
            for (j, b) in self.backends.iter_mut().enumerate() {
                if sg.nodes[j].is_empty() {
                    continue;
                }
                let st = b.graph_compute(GraphView {
                    ctx: &plan.ctxs[j],
                    nodes: &sg.nodes[j],
                });
                if st != Status::Success {
                    return Err(MetaError(format!(
                        "subgraph {k} on {} failed: {st}",
                        b.name()
                    )));
                }
            }
            let Some(r) = sg.reduce else {
                if debug {
                    crate::log_debug!(
                        "META: subgraph {k}: nodes {}..{} ({} .. {}), no reduce\n",
                        sg.first,
                        sg.last,
                        graph.ctx[graph.nodes[sg.first]].name,
                        graph.ctx[graph.nodes[sg.last]].name
                    );
                }
                continue;
            };
            let id = graph.nodes[r];
            let tensors: Vec<Tensor> = plan.ctxs.iter().map(|c| c[id].clone()).collect();
            let computed: Vec<bool> = (0..n).map(|j| plan.computed[j][r]).collect();
            for b in self.backends.iter_mut() {
                b.synchronize().map_err(|e| MetaError(e.to_string()))?;
            }
            let mut by_comm = false;
            if let Some(c) = self.comm.as_mut() {
                if computed.iter().all(|&c| c) {
                    let refs: Vec<&Tensor> = tensors.iter().collect();
                    by_comm = c.allreduce(&refs);
                }
            }
            let steps = if by_comm {
                Vec::new()
            } else {
                allreduce_fallback(&mut self.backends, &tensors, &computed, &mut self.tmp)?
            };
            if debug {
                let how = if by_comm {
                    "the backend's allreduce".to_string()
                } else {
                    format!("butterfly, {} steps", n_reduce_steps(n))
                };
                crate::log_debug!(
                    "META: subgraph {k}: nodes {}..{} ({} .. {}), AllReduce {} [{}] via {how}\n",
                    sg.first,
                    sg.last,
                    graph.ctx[graph.nodes[sg.first]].name,
                    graph.ctx[graph.nodes[sg.last]].name,
                    graph.ctx[id].name,
                    graph.ctx[id].op.name()
                );
            }
            self.last_reduces.push(ReduceRecord {
                node: graph.ctx[id].name.clone(),
                comm: by_comm,
                steps,
            });
        }
        Ok(())
    }
}

impl Backend for MetaBackend {
    fn name(&self) -> &str {
        &self.name
    }
    fn device(&self) -> DeviceRef {
        self.dev.clone()
    }
    fn graph_compute(&mut self, graph: GraphView<'_>) -> Status {
        match self.compute(graph) {
            Ok(()) => Status::Success,
            Err(e) => {
                crate::log_error!("ggml_backend_meta_graph_compute: {e}\n");
                Status::Failed(e.to_string())
            }
        }
    }
    fn synchronize(&mut self) -> Result<(), crate::backend::BackendError> {
        let mut first = Ok(());
        for b in self.backends.iter_mut() {
            let r = b.synchronize();
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
    fn set_n_threads(&mut self, n: usize) {
        for b in self.backends.iter_mut() {
            b.set_n_threads(n);
        }
    }
    fn set_graph_threads(&mut self, n: usize, batch: bool) {
        for b in self.backends.iter_mut() {
            b.set_graph_threads(n, batch);
        }
    }
    fn set_abort_callback(&mut self, cb: Option<Arc<dyn Fn() -> bool + Send + Sync>>) {
        for b in self.backends.iter_mut() {
            b.set_abort_callback(cb.clone());
        }
    }
}
