//! Device discovery and selection.

mod common;

use ptxvk_runtime::{enumerate_devices, Context, DeviceSelector, Error};

#[test]
fn enumerate_and_select() {
    common::setup();
    let devices = enumerate_devices().unwrap();
    assert!(!devices.is_empty(), "no usable Vulkan device");
    for (i, d) in devices.iter().enumerate() {
        assert_eq!(d.index, i);
        assert!(!d.name.is_empty());
    }
    let ctx = Context::new(DeviceSelector::Index(0)).unwrap();
    assert_eq!(ctx.info().uuid, devices[0].uuid);
    assert_eq!(ctx.info().name, devices[0].name);
    let default = Context::new(DeviceSelector::Default).unwrap();
    assert_eq!(default.info().uuid, devices[0].uuid);
    assert!(matches!(Context::new(DeviceSelector::Index(devices.len())), Err(Error::InvalidValue(_))));
    let info = ctx.info();
    assert!(info.max_threads_per_block >= 128 && info.max_threads_per_block.is_multiple_of(32));
    assert_eq!(info.max_grid_dim, [i32::MAX as u32, 65535, 65535]);
    assert!(info.max_shared_bytes >= 16384);
    assert!(info.max_push_constant_bytes >= 128);
    assert!(info.subgroup_size >= 1);
    assert!(info.total_memory > 0);
    assert!(info.multiprocessor_count >= 1);
    common::assert_clean(&ctx);

    // PTXVK_DEVICE names a device by case-insensitive name substring or index
    // into the type-sorted list; a name that matches nothing leaves the order alone.
    let original = std::env::var_os("PTXVK_DEVICE");
    std::env::remove_var("PTXVK_DEVICE");
    let base = enumerate_devices().unwrap();
    std::env::set_var("PTXVK_DEVICE", base[0].name.to_uppercase());
    assert_eq!(enumerate_devices().unwrap()[0].uuid, base[0].uuid);
    std::env::set_var("PTXVK_DEVICE", "0");
    assert_eq!(enumerate_devices().unwrap()[0].uuid, base[0].uuid);
    std::env::set_var("PTXVK_DEVICE", "no such device");
    assert_eq!(enumerate_devices().unwrap(), base);
    if let Some(last) = base.last() {
        std::env::set_var("PTXVK_DEVICE", format!("{}", base.len() - 1));
        assert_eq!(enumerate_devices().unwrap()[0].uuid, last.uuid);
        let ctx = Context::new(DeviceSelector::Default).unwrap();
        assert_eq!(ctx.info().uuid, last.uuid);
    }
    match original {
        Some(v) => std::env::set_var("PTXVK_DEVICE", v),
        None => std::env::remove_var("PTXVK_DEVICE"),
    }
}
