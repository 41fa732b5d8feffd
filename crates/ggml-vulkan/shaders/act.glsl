// The activation functions of the unary and GLU shaders, as ggml's CPU defines them.
const float SQRT_2_OVER_PI = 0.79788456080286535587989211986876;
const float GELU_COEF_A = 0.044715;
const float GELU_QUICK_COEF = -1.702;

float act_gelu(float x) {
    return 0.5 * x * (1.0 + tanh(SQRT_2_OVER_PI * x * (1.0 + GELU_COEF_A * x * x)));
}

// erf by Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7); GLSL has none.
float erf_approx(float x) {
    float s = sign(x);
    float a = abs(x);
    float t = 1.0 / (1.0 + 0.3275911 * a);
    float y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
        + 0.254829592) * t * exp(-a * a);
    return s * y;
}

float act_gelu_erf(float x) {
    return 0.5 * x * (1.0 + erf_approx(x * 0.70710678118654752440));
}

float act_gelu_quick(float x) {
    return x * (1.0 / (1.0 + exp(GELU_QUICK_COEF * x)));
}

float act_silu(float x) {
    return x / (1.0 + exp(-x));
}
