//! The `local_runner` backend: a GGUF model run in this process by llama.cpp (the `llama-cpp-2`
//! crate, built with the `local-runner` cargo feature), offline, on one host.
//!
//! One thread owns the model and its context and answers one request at a time from a bounded
//! queue (`llm.local_queue_max`; a request past it is refused at once, 503, rather than waiting
//! behind minutes of generation). That thread, and the threads llama.cpp starts from it, run on
//! the cores the data plane does not pin (they inherit its CPU set); where the data plane pins
//! every core they run at the lowest priority instead, so that inference never takes a core from
//! ingest. Sampling is held by a grammar where the feature gives one ([`super::grammar`]).

use super::grammar::Grammar;
use super::{BackendError, LlmError, ModelFileError};
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use std::num::NonZeroU32;
use std::path::Path;
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use watchpost_proto::config::LlmConfig;

/// Most tokens an answer may take: the longest answer a feature needs (an explanation).
const MAX_ANSWER_TOKENS: usize = 512;

/// One request to the runner thread.
struct Job {
    system: String,
    user: String,
    grammar: Option<Grammar>,
    max_tokens: usize,
    deadline: Instant,
    reply: tokio::sync::oneshot::Sender<Result<Generated, LlmError>>,
}

/// An answer and what it took.
#[derive(Debug, Clone)]
pub struct Generated {
    /// The text.
    pub text: String,
    /// Tokens of the prompt.
    pub prompt_tokens: usize,
    /// Tokens generated.
    pub tokens: usize,
    /// Time of the prompt's evaluation.
    pub prefill: Duration,
    /// Time of the generation.
    pub generation: Duration,
}

/// The runner's state, as `/health` reports it.
#[derive(Debug, Clone)]
enum State {
    Loading,
    Ready,
    Failed(String),
}

/// See the module's documentation.
#[derive(Debug)]
pub struct LocalRunner {
    jobs: SyncSender<Job>,
    /// `llm.n_ctx`: an answer may take at most half of it.
    n_ctx: u32,
    state: Arc<Mutex<State>>,
    name: String,
}

impl LocalRunner {
    /// Checks `llm.model_path` (a readable GGUF file) and starts the runner thread, which loads
    /// the model; `cores` are those it may run on (empty: any, at the lowest priority).
    pub fn start(cfg: &LlmConfig, cores: Vec<usize>) -> Result<LocalRunner, BackendError> {
        let path = Path::new(&cfg.model_path);
        check_gguf(path).map_err(|why| BackendError::Model {
            path: path.to_path_buf(),
            why,
        })?;
        let (jobs, queue) = sync_channel::<Job>(cfg.local_queue_max as usize);
        let state = Arc::new(Mutex::new(State::Loading));
        let thread_state = state.clone();
        let settings = Settings {
            path: path.to_path_buf(),
            n_ctx: cfg.n_ctx,
            n_gpu_layers: cfg.n_gpu_layers,
            threads: cores.len().max(1),
        };
        std::thread::Builder::new()
            .name("llm-runner".into())
            .spawn(move || {
                // Whatever ends the thread (a panic in llama.cpp's bindings among it), the
                // backend then reports it, rather than "loading" or "ready" forever.
                let _stopped = Stopped(thread_state.clone());
                confine(&cores);
                run(settings, &thread_state, queue);
            })
            .map_err(BackendError::Thread)?;
        Ok(LocalRunner {
            jobs,
            n_ctx: cfg.n_ctx,
            state,
            name: path.file_name().map_or_else(
                || cfg.model_path.clone(),
                |n| n.to_string_lossy().into_owned(),
            ),
        })
    }

    /// The model's file name.
    pub fn model(&self) -> &str {
        &self.name
    }

    /// Ok once the model is loaded.
    pub fn ready(&self) -> Result<(), LlmError> {
        match &*self
            .state
            .lock()
            .map_err(|_| LlmError::NotReady("the runner failed".into()))?
        {
            State::Ready => Ok(()),
            State::Loading => Err(LlmError::NotReady("the model is still loading".into())),
            State::Failed(why) => Err(LlmError::NotReady(why.clone())),
        }
    }

    /// One answer to a system and a user message, under `grammar` when given, within
    /// `deadline`. A full queue is refused at once.
    pub async fn complete(
        &self,
        system: &str,
        user: &str,
        grammar: Option<Grammar>,
        deadline: Duration,
    ) -> Result<Generated, LlmError> {
        self.ready()?;
        let (reply, answer) = tokio::sync::oneshot::channel();
        let job = Job {
            system: system.to_string(),
            user: user.to_string(),
            grammar,
            max_tokens: MAX_ANSWER_TOKENS.min(self.n_ctx as usize / 2),
            deadline: Instant::now() + deadline,
            reply,
        };
        match self.jobs.try_send(job) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                return Err(LlmError::Busy(
                    "the local model is answering other requests and its queue is full \
                     (llm.local_queue_max); try again shortly"
                        .into(),
                ));
            }
            Err(TrySendError::Disconnected(_)) => {
                return Err(LlmError::NotReady("the model runner has stopped".into()));
            }
        }
        answer
            .await
            .map_err(|_| LlmError::Upstream("the model runner dropped the request".into()))?
    }
}

/// Marks the runner failed when its thread ends.
struct Stopped(Arc<Mutex<State>>);

impl Drop for Stopped {
    fn drop(&mut self) {
        let mut state = match self.0.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        };
        if !matches!(*state, State::Failed(_)) {
            *state = State::Failed("the model runner's thread has stopped".into());
        }
    }
}

/// What the runner thread needs.
struct Settings {
    path: std::path::PathBuf,
    n_ctx: u32,
    n_gpu_layers: u32,
    threads: usize,
}

/// A GGUF file starts with these bytes.
const GGUF_MAGIC: &[u8; 4] = b"GGUF";

/// Whether `path` is a readable file that starts like a GGUF model: the start-up check that
/// names the key; llama.cpp's own load then finds deeper damage.
fn check_gguf(path: &Path) -> Result<(), ModelFileError> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).map_err(ModelFileError::Open)?;
    let mut magic = [0u8; 4];
    file.read_exact(&mut magic)
        .map_err(|_| ModelFileError::Short)?;
    if &magic != GGUF_MAGIC {
        return Err(ModelFileError::NotGguf);
    }
    Ok(())
}

/// Confines the calling thread (and the threads it starts, which inherit its CPU set) to
/// `cores`; without any, lowers its priority to the least.
fn confine(cores: &[usize]) {
    // SAFETY: plain system calls on the calling thread with a set built here.
    unsafe {
        if cores.is_empty() {
            libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 19);
            return;
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        // A set holds CPU_SETSIZE (1,024) cores; higher ids cannot be named in it.
        for &c in cores.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(c, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// The runner thread: loads the model, then answers jobs until the service stops.
fn run(settings: Settings, state: &Mutex<State>, queue: std::sync::mpsc::Receiver<Job>) {
    let set = |s: State| {
        if let Ok(mut st) = state.lock() {
            *st = s;
        }
    };
    // llama.cpp's log goes to the service's (which keeps its warnings and errors), not stderr.
    llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
    let backend = match LlamaBackend::init() {
        Ok(b) => b,
        Err(e) => return set(State::Failed(format!("llama.cpp: {e}"))),
    };
    let params = LlamaModelParams::default().with_n_gpu_layers(settings.n_gpu_layers);
    let model = match LlamaModel::load_from_file(&backend, &settings.path, &params) {
        Ok(m) => m,
        Err(e) => {
            return set(State::Failed(format!(
                "llm.model_path: {}: llama.cpp cannot load it: {e}",
                settings.path.display()
            )));
        }
    };
    set(State::Ready);
    tracing::info!(
        "local model {} loaded ({} parameters, {} MB)",
        settings.path.display(),
        model.n_params(),
        model.size() >> 20
    );
    for job in queue {
        // A request whose caller went away (a closed connection) is not worked on.
        if job.reply.is_closed() {
            continue;
        }
        let answer = if Instant::now() >= job.deadline {
            Err(LlmError::Upstream(
                "the request waited past its deadline in the queue".into(),
            ))
        } else {
            answer(&backend, &model, &settings, &job)
        };
        let _ = job.reply.send(answer);
    }
}

/// One job on the loaded model: a fresh context, the chat template, the prompt evaluated, then
/// tokens sampled until the end of turn, `max_tokens`, or the deadline.
fn answer(
    backend: &LlamaBackend,
    model: &LlamaModel,
    settings: &Settings,
    job: &Job,
) -> Result<Generated, LlmError> {
    let failed = |what: &str, e: &dyn std::fmt::Display| LlmError::Upstream(format!("{what}: {e}"));
    let n_ctx = settings.n_ctx as usize;
    let threads = settings.threads as i32;
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(settings.n_ctx))
        .with_n_batch(settings.n_ctx)
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let mut ctx = model
        .new_context(backend, params)
        .map_err(|e| failed("llama.cpp context", &e))?;
    let template = model
        .chat_template(None)
        .map_err(|e| failed("the model's chat template", &e))?;
    let vocab = model.vocab();
    // The user message is shortened until the prompt leaves room for the answer.
    let mut user = job.user.clone();
    let tokens = loop {
        let chat = [
            LlamaChatMessage::new("system".into(), job.system.clone())
                .map_err(|e| failed("the system message", &e))?,
            LlamaChatMessage::new("user".into(), user.clone())
                .map_err(|e| failed("the user message", &e))?,
        ];
        let prompt = model
            .apply_chat_template(&template, &chat, true)
            .map_err(|e| failed("the chat template", &e))?;
        let tokens = vocab.tokenize(prompt.as_bytes(), false, true);
        if tokens.len() + job.max_tokens <= n_ctx {
            break tokens;
        }
        if user.len() < 256 {
            return Err(LlmError::Upstream(format!(
                "the prompt ({} tokens) leaves no room for an answer in llm.n_ctx = {n_ctx}",
                tokens.len()
            )));
        }
        let mut cut = user.len() * 3 / 4;
        while !user.is_char_boundary(cut) {
            cut -= 1;
        }
        user.truncate(cut);
        user.push_str("\n[cut to fit the model's context]\n");
    };
    let mut batch = LlamaBatch::new(n_ctx, 1);
    let last = tokens.len() - 1;
    for (i, token) in tokens.iter().enumerate() {
        batch
            .add(*token, i as i32, &[0], i == last)
            .map_err(|e| failed("the prompt batch", &e))?;
    }
    let started = Instant::now();
    ctx.decode(&mut batch)
        .map_err(|e| failed("evaluating the prompt", &e))?;
    let prefill = started.elapsed();
    let mut samplers = Vec::new();
    if let Some(g) = &job.grammar {
        samplers.push(
            LlamaSampler::grammar(model, &g.0, "root")
                .map_err(|e| failed("the answer's grammar", &e))?,
        );
    }
    samplers.push(LlamaSampler::temp(0.2));
    samplers.push(LlamaSampler::dist(0x5eed));
    let mut sampler = LlamaSampler::chain_simple(samplers);
    let mut text = Vec::new();
    let mut position = tokens.len() as i32;
    let mut generated = 0;
    let generating = Instant::now();
    while generated < job.max_tokens {
        if Instant::now() >= job.deadline {
            return Err(LlmError::Upstream(format!(
                "no complete answer within the deadline ({generated} tokens generated)"
            )));
        }
        if job.reply.is_closed() {
            return Err(LlmError::Upstream("the caller went away".into()));
        }
        // Sampling also accepts the token into the chain (the grammar's state among it).
        let token = sampler.sample(&ctx, batch.n_tokens() - 1);
        if vocab.is_eog(token) {
            break;
        }
        text.extend(vocab.token_to_piece(token, false, None));
        generated += 1;
        batch.clear();
        batch
            .add(token, position, &[0], true)
            .map_err(|e| failed("the answer batch", &e))?;
        position += 1;
        ctx.decode(&mut batch)
            .map_err(|e| failed("generating", &e))?;
    }
    Ok(Generated {
        text: String::from_utf8_lossy(&text).trim().to_string(),
        prompt_tokens: tokens.len(),
        tokens: generated,
        prefill,
        generation: generating.elapsed(),
    })
}
