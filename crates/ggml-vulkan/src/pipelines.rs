//! The committed SPIR-V (built from shaders/*.comp by scripts/build-vulkan-shaders) and the
//! compute pipelines made from it on first use. Every shader has the same interface: six
//! storage buffers (src0, src1, src2, dst, src3, src4) pushed as descriptors, and 128 bytes of
//! push constants.

use ash::vk;
use std::collections::HashMap;
use std::sync::Mutex;

pub(crate) const PUSH_BYTES: u32 = 128;
pub(crate) const N_BINDINGS: u32 = 6;

macro_rules! spirv {
    ($($name:literal),* $(,)?) => {
        &[$(($name, include_bytes!(concat!("../spirv/", $name, ".spv")) as &[u8])),*]
    };
}

/// Every shader by name.
pub(crate) const SHADERS: &[(&str, &[u8])] = spirv![
    "binary",
    "unary",
    "glu",
    "cpy",
    "set_rows",
    "norm",
    "soft_max",
    "rope",
    "flash_attn",
    "sum_rows",
    "concat",
    "argsort",
    "add_id",
    "mul_mat_f32",
    "mul_mat_f16",
    "mul_mat_bf16",
    "mul_mat_q4_0",
    "mul_mat_q4_1",
    "mul_mat_q5_0",
    "mul_mat_q5_1",
    "mul_mat_q8_0",
    "mul_mat_q2_k",
    "mul_mat_q3_k",
    "mul_mat_q4_k",
    "mul_mat_q5_k",
    "mul_mat_q6_k",
    "mul_mat_iq4_nl",
    "mul_mat_f16_f64",
    "mul_mat_q4_0_f64",
    "mul_mat_q5_0_f64",
    "mul_mat_q8_0_f64",
    "mul_mat_q3_k_f64",
    "mul_mat_q4_k_f64",
    "mul_mat_q5_k_f64",
    "mul_mat_q6_k_f64",
    "norm_f64",
    "flash_attn_f64",
    "rope_f64",
    "glu_f64",
    "soft_max_f64",
    "get_rows_f32",
    "get_rows_f16",
    "get_rows_bf16",
    "get_rows_q4_0",
    "get_rows_q4_1",
    "get_rows_q5_0",
    "get_rows_q5_1",
    "get_rows_q8_0",
    "get_rows_q2_k",
    "get_rows_q3_k",
    "get_rows_q4_k",
    "get_rows_q5_k",
    "get_rows_q6_k",
    "get_rows_iq4_nl",
    "mul_mat_id_f32",
    "mul_mat_id_f16",
    "mul_mat_id_bf16",
    "mul_mat_id_q4_0",
    "mul_mat_id_q4_1",
    "mul_mat_id_q5_0",
    "mul_mat_id_q5_1",
    "mul_mat_id_q8_0",
    "mul_mat_id_q2_k",
    "mul_mat_id_q3_k",
    "mul_mat_id_q4_k",
    "mul_mat_id_q5_k",
    "mul_mat_id_q6_k",
    "mul_mat_id_iq4_nl",
];

pub(crate) struct Pipelines {
    pub set_layout: vk::DescriptorSetLayout,
    pub layout: vk::PipelineLayout,
    made: Mutex<HashMap<&'static str, vk::Pipeline>>,
    /// use a shader's `_f64` variant where there is one (exact rounding on lavapipe)
    exact_f64: bool,
}

impl Pipelines {
    pub(crate) fn new(device: &ash::Device, exact_f64: bool) -> Result<Pipelines, String> {
        let bindings: Vec<_> = (0..N_BINDINGS)
            .map(|b| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(b)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        let info = vk::DescriptorSetLayoutCreateInfo::default()
            .flags(vk::DescriptorSetLayoutCreateFlags::PUSH_DESCRIPTOR_KHR)
            .bindings(&bindings);
        // SAFETY: the device is valid; the layouts are destroyed in destroy().
        let set_layout = unsafe { device.create_descriptor_set_layout(&info, None) }
            .map_err(|e| format!("vkCreateDescriptorSetLayout: {e:?}"))?;
        let ranges = [vk::PushConstantRange::default()
            .stage_flags(vk::ShaderStageFlags::COMPUTE)
            .size(PUSH_BYTES)];
        let sets = [set_layout];
        let info = vk::PipelineLayoutCreateInfo::default()
            .set_layouts(&sets)
            .push_constant_ranges(&ranges);
        // SAFETY: as above.
        let layout = match unsafe { device.create_pipeline_layout(&info, None) } {
            Ok(l) => l,
            Err(e) => {
                // SAFETY: made above and unused.
                unsafe { device.destroy_descriptor_set_layout(set_layout, None) };
                return Err(format!("vkCreatePipelineLayout: {e:?}"));
            }
        };
        Ok(Pipelines {
            set_layout,
            layout,
            made: Mutex::new(HashMap::new()),
            exact_f64,
        })
    }

    /// The pipeline of shader `name`, made on first use; a failure names the shader (and so
    /// the op).
    pub(crate) fn get(
        &self,
        device: &ash::Device,
        name: &'static str,
    ) -> Result<vk::Pipeline, String> {
        let mut made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&p) = made.get(name) {
            return Ok(p);
        }
        let variant = SHADERS
            .iter()
            .filter(|_| self.exact_f64)
            .find(|(n, _)| n.strip_suffix("_f64") == Some(name));
        let bytes = variant
            .or_else(|| SHADERS.iter().find(|(n, _)| *n == name))
            .map(|(_, b)| *b)
            .ok_or_else(|| format!("no shader '{name}'"))?;
        let code = ash::util::read_spv(&mut std::io::Cursor::new(bytes))
            .map_err(|e| format!("shader '{name}': bad SPIR-V ({e})"))?;
        let info = vk::ShaderModuleCreateInfo::default().code(&code);
        // SAFETY: the SPIR-V words live across the call; the module is destroyed below.
        let module = unsafe { device.create_shader_module(&info, None) }
            .map_err(|e| format!("shader '{name}': vkCreateShaderModule failed ({e:?})"))?;
        let stage = vk::PipelineShaderStageCreateInfo::default()
            .stage(vk::ShaderStageFlags::COMPUTE)
            .module(module)
            .name(c"main");
        let info = [vk::ComputePipelineCreateInfo::default()
            .stage(stage)
            .layout(self.layout)];
        // SAFETY: the module and layout are valid; the module is no longer needed afterwards.
        let made_now = unsafe {
            let r = device.create_compute_pipelines(vk::PipelineCache::null(), &info, None);
            device.destroy_shader_module(module, None);
            r
        };
        let pipeline = made_now.map_err(|(_, e)| {
            format!("shader '{name}': vkCreateComputePipelines failed ({e:?})")
        })?[0];
        made.insert(name, pipeline);
        Ok(pipeline)
    }

    /// # Safety
    /// No submission using the pipelines is in flight; called once.
    pub(crate) unsafe fn destroy(&self, device: &ash::Device) {
        let made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        for &p in made.values() {
            device.destroy_pipeline(p, None);
        }
        device.destroy_pipeline_layout(self.layout, None);
        device.destroy_descriptor_set_layout(self.set_layout, None);
    }
}
