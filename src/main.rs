//! The `omnivoice-server` binary: parse settings, set up logging and engines, serve.

use std::process::ExitCode;
use std::sync::Arc;

use candle_core::Device;
use clap::Parser;
use omnivoice_server::config::{Cli, Command, DeviceChoice, LogFormat, ServeArgs, Settings};
use omnivoice_server::engine::espeak::EspeakEngine;
use omnivoice_server::engine::kokoro::{self, KokoroEngine};
use omnivoice_server::engine::omnivoice::{self, OmniVoiceEngine};
use omnivoice_server::engine::piper::PiperEngine;
use omnivoice_server::engine::Engine;
use omnivoice_server::profiles::voice_files::VoiceFiles;
use omnivoice_server::profiles::ProfileStore;
use omnivoice_server::server;

/// Exit code for unusable settings, as clap uses for bad flags.
const EXIT_CONFIG: u8 = 2;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            // One line naming the setting; clap's usage hints would bury it in a log.
            let rendered = e.render().to_string();
            let line = rendered
                .lines()
                .next()
                .unwrap_or("error: invalid command line");
            eprintln!("{line}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    match cli.command {
        Some(Command::ConvertVoice { input, output }) => convert_voice(&input, &output),
        Some(Command::Serve(args)) => serve(*args),
        Some(Command::Selftest {
            omnivoice_dir,
            precision,
            num_step,
        }) => selftest(&omnivoice_dir, precision.requested(), num_step),
        None => serve(cli.serve),
    }
}

fn serve(args: ServeArgs) -> ExitCode {
    let settings = match Settings::resolve(&args) {
        Ok(settings) => settings,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    init_logging(&settings);
    share_cores_among_workers(settings.max_concurrent);
    omnivoice_server::allocator::tune();
    let (device, device_reason) = match select_device(settings.device) {
        Ok(chosen) => chosen,
        Err(e) => {
            eprintln!("error: invalid setting 'device': {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let device_name = describe(&device);
    // Before the engines: OmniVoice clones from these profiles. Opening finishes (or drops)
    // a write that a crash interrupted.
    let profiles = match ProfileStore::open(&settings.profile_dir) {
        Ok(store) => Arc::new(store),
        Err(e) => {
            eprintln!(
                "error: invalid setting 'profile-dir': cannot open {}: {e}",
                settings.profile_dir.display()
            );
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    // One reader for the engine and the routes that list them, so that a bad file is
    // reported once.
    let voice_files = Arc::new(VoiceFiles::new(&settings.voice_file_dir));
    // Said once the settings are known to be valid: a refused start stays one line.
    let kernel_paths = device.is_cpu().then(omnivoice_models::kernels::isa_report);
    let piper = PiperEngine::new(&settings.voices_dir, device.clone())
        .with_precision(settings.precision.requested());
    let mut engines: Vec<Arc<dyn Engine>> = vec![Arc::new(piper), Arc::new(EspeakEngine::new())];
    if omnivoice::is_installed(&settings.omnivoice_dir) {
        // Every tensor's name and shape, from the headers alone: a wrong or truncated
        // checkpoint is refused now, not at its first request.
        if let Err(e) = omnivoice::check_checkpoint(&settings.omnivoice_dir) {
            eprintln!("error: invalid setting 'omnivoice-dir': {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
        let engine = OmniVoiceEngine::new(&settings.omnivoice_dir, device.clone())
            .with_precision(settings.precision.requested())
            .with_profiles(profiles.clone())
            .with_voice_files(voice_files.clone());
        engines.push(Arc::new(engine));
    } else {
        // The usual case (the checkpoint is a download of its own): not worth a line at info.
        tracing::debug!(dir = %settings.omnivoice_dir.display(), "no OmniVoice checkpoint ({}) there; the omnivoice engine is off", omnivoice::CHECKPOINT_FILES.join(", "));
    }
    // Before any Mandarin voice is listed or loaded: where its pinyin tables are.
    omnivoice_server::text::mandarin::set_dir(settings.mandarin_dir.clone());
    if kokoro::model_file(&settings.kokoro_dir).is_some() {
        let kokoro = KokoroEngine::new(&settings.kokoro_dir, device)
            .with_precision(settings.precision.requested());
        engines.push(Arc::new(kokoro));
    } else {
        tracing::info!(dir = %settings.kokoro_dir.display(), "no Kokoro model ({}) there; the kokoro engine is off (scripts/kokoro-assets.sh installs it)", kokoro::MODEL_FILES.join(", "));
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let code = runtime.block_on(async move {
        let address = (settings.host, settings.port);
        let state = match server::build(
            settings,
            engines,
            profiles,
            voice_files,
            device_name.clone(),
        ) {
            Ok(state) => state,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::from(EXIT_CONFIG);
            }
        };
        let settings = &state.settings;
        let listener = match tokio::net::TcpListener::bind(address).await {
            Ok(listener) => listener,
            Err(e) => {
                eprintln!(
                    "error: invalid setting 'port': cannot listen on {}:{}: {e}",
                    settings.host, settings.port
                );
                return ExitCode::from(EXIT_CONFIG);
            }
        };
        let wyoming = match settings.wyoming_port {
            None => None,
            Some(port) => match tokio::net::TcpListener::bind((settings.host, port)).await {
                Ok(listener) => Some(listener),
                Err(e) => {
                    eprintln!(
                        "error: invalid setting 'wyoming-port': cannot listen on {}:{port}: {e}",
                        settings.host
                    );
                    return ExitCode::from(EXIT_CONFIG);
                }
            },
        };
        let local = listener.local_addr().expect("bound address");
        tracing::info!(device = %device_name, "{device_reason}");
        if let Some(paths) = &kernel_paths {
            tracing::info!("{paths}");
        }
        tracing::info!(address = %local, device = %device_name, "listening");
        // Tests and scripts read these lines to find ephemeral ports.
        println!("omnivoice-server listening on http://{local}");
        if let Some(wyoming) = &wyoming {
            let local = wyoming.local_addr().expect("bound address");
            tracing::info!(address = %local, "wyoming listening");
            println!("omnivoice-server wyoming on tcp://{local}");
        }
        match server::run(state, listener, wyoming, shutdown_signal()).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                tracing::error!(error = %e, "server failed");
                ExitCode::FAILURE
            }
        }
    });
    // Dropping the runtime would wait for its blocking threads, and a forward pass cannot be
    // interrupted: the process kept computing for minutes after the grace period. The drain
    // is over, so leave those threads to the process exit.
    runtime.shutdown_background();
    code
}

/// Each inference worker computes one batch at a time; candle's own thread pool would give every
/// worker all cores and oversubscribe the machine. Split the cores among the workers instead,
/// unless the user chose a thread count. Runs before any thread exists, as `set_var` requires.
fn share_cores_among_workers(workers: usize) {
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        let threads = (num_cpus::get() / workers.max(1)).max(1);
        std::env::set_var("RAYON_NUM_THREADS", threads.to_string());
    }
}

fn init_logging(settings: &Settings) {
    let filter = tracing_subscriber::EnvFilter::new(&settings.log_level);
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match settings.log_format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}

/// The device for `choice`, and why it was chosen: for `auto` that matters, since a server
/// that quietly ran on the CPU beside an idle GPU (or the reverse) is hard to diagnose.
fn select_device(choice: DeviceChoice) -> candle_core::Result<(Device, String)> {
    let asked = |device| Ok((device, "device as configured".to_string()));
    match choice {
        DeviceChoice::Cpu => asked(Device::Cpu),
        DeviceChoice::Cuda => asked(Device::new_cuda(0)?),
        DeviceChoice::Metal => asked(Device::new_metal(0)?),
        DeviceChoice::Auto => {
            let gpu = if candle_core::utils::cuda_is_available() {
                Some(("cuda", Device::new_cuda(0)))
            } else if candle_core::utils::metal_is_available() {
                Some(("metal", Device::new_metal(0)))
            } else {
                None
            };
            Ok(match gpu {
                Some((kind, Ok(device))) => (
                    device,
                    format!("device auto: built with {kind} and device 0 opened"),
                ),
                Some((kind, Err(e))) => (
                    Device::Cpu,
                    format!("device auto: built with {kind} but device 0 did not open ({e}); using the cpu"),
                ),
                None => (
                    Device::Cpu,
                    "device auto: built without the cuda and metal features; using the cpu".into(),
                ),
            })
        }
    }
}

fn describe(device: &Device) -> String {
    match device {
        Device::Cpu => "cpu".into(),
        Device::Cuda(_) => "cuda:0".into(),
        Device::Metal(_) => "metal:0".into(),
    }
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => {}
        _ = terminate => {}
    }
}

fn selftest(
    dir: &std::path::Path,
    precision: Option<omnivoice_models::kernels::Precision>,
    num_step: u32,
) -> ExitCode {
    let engine = OmniVoiceEngine::new(dir, Device::Cpu).with_precision(precision);
    match omnivoice::selftest::run(&engine, num_step) {
        Ok(report) => {
            println!("selftest passed: {report}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("selftest failed: {}", omnivoice_server::speech::chain(&e));
            ExitCode::FAILURE
        }
    }
}

fn convert_voice(input: &std::path::Path, output: &std::path::Path) -> ExitCode {
    let json_path = input.with_extension("onnx.json");
    let result = std::fs::read_to_string(&json_path)
        .map_err(|e| format!("cannot read {}: {e}", json_path.display()))
        .and_then(|text| {
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", json_path.display()))
        })
        .and_then(|config: serde_json::Value| {
            let started = std::time::Instant::now();
            use omnivoice_models::vits::{Vits, VitsConfig, Weights};
            let weights = Weights::from_onnx(input, &Device::Cpu).map_err(|e| e.to_string())?;
            let config = VitsConfig::from_weights(&weights, &config).map_err(|e| e.to_string())?;
            let model = Vits::load(&config, weights).map_err(|e| e.to_string())?;
            model.save_safetensors(output).map_err(|e| e.to_string())?;
            Ok(started.elapsed())
        });
    match result {
        Ok(elapsed) => {
            println!(
                "wrote {} in {:.2} s",
                output.display(),
                elapsed.as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
