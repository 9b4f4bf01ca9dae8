//! NVRTC compilation of the CUDA kernels a step plans (`CompiledStep::call_planning_for`), for
//! tests that check generated CUDA C on a machine without a GPU.

/// Compiles each kernel, and each one's vector variant, to CUBIN for sm_80 and sm_90, panicking
/// on any NVRTC error; prints a skip line without NVRTC.
pub fn compile_each_to_cubin(what: &str, kernels: &[kiln::capture::KernelInfo]) {
    use kiln_runtime::cuda;
    if !cuda::nvrtc_for_tests(what) {
        return;
    }
    let mut compiled = 0;
    for k in kernels {
        // Elementwise kernels carry their 16-byte variant; reductions have none.
        assert_eq!(k.vector_variant.is_some(), !k.name.starts_with("kiln_fused_red_"), "{}", k.name);
        let variant = k.vector_variant.as_ref().map(|v| (&v.name, &v.source));
        for (name, source) in std::iter::once((&k.name, &k.source)).chain(variant) {
            assert!(source.contains(name.as_str()), "{name}");
            for arch in [80, 90] {
                let c =
                    cuda::compile(source, name, arch).unwrap_or_else(|e| panic!("{name} (sm_{arch}): {e}\n{source}"));
                assert_eq!(&c.cubin[..4], b"\x7fELF", "{name}: not a CUBIN");
                compiled += 1;
            }
        }
    }
    println!("{compiled} {what} kernels and vector variants compiled to CUBIN");
}
