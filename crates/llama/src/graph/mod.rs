//! Graph building (llm_graph_context).
pub(crate) struct GraphBuilder;
