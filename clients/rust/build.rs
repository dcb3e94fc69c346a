//! Generates the gaigel.v1 messages and the BotService client from ../../proto with
//! tonic-prost-build. Needs `protoc` on PATH (Debian: `apt-get install protobuf-compiler`)
//! or in the PROTOC environment variable.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = "../../proto".to_string();
    let files = [
        "gaigel/v1/bot_service.proto",
        "gaigel/v1/common.proto",
        "gaigel/v1/game.proto",
    ]
    .map(|f| format!("{root}/{f}"));
    tonic_prost_build::configure()
        .build_server(false)
        .compile_protos(&files, std::slice::from_ref(&root))?;
    println!("cargo:rerun-if-changed={root}/gaigel/v1");
    Ok(())
}
