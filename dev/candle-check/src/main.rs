//! Uses one item of humming and one of candle-core, so that both (and the single cudarc they share)
//! are compiled together. Checked, not run: see README.md.

fn main() -> candle_core::Result<()> {
    let t = candle_core::Tensor::new(&[1f32, 2., 3.], &candle_core::Device::Cpu)?;
    println!("candle sum: {}", t.sum_all()?.to_scalar::<f32>()?);
    println!("humming driver_present: {}", humming::cuda::driver_present());
    Ok(())
}
