//! The QuickJS engine wrapper behind `run_javascript` (S5.7): one fresh
//! runtime and context per call, JSON in and JSON out, and a typed error for
//! each exceeded limit. Pure and synchronous; builds natively and for wasm32
//! (in the browser only inside the Worker's own module, `agent-js-worker`).

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use rquickjs::context::intrinsic;
use rquickjs::{CatchResultExt, CaughtError, Context, Ctx, Persistent, Runtime, Value};

use super::limits::{ERROR_TEXT_BYTES, JsError, JsLimits, JsOutput};
/// How many promise jobs run between two samples of the heap's size.
const HEAP_SAMPLE_JOBS: u64 = 1024;

/// The intrinsics a context gets: the language and its standard library,
/// nothing of a host. No `Performance` (timers), no module loader.
type Intrinsics = (
    intrinsic::Date,
    intrinsic::Eval,
    intrinsic::RegExpCompiler,
    intrinsic::RegExp,
    intrinsic::Json,
    intrinsic::Proxy,
    intrinsic::MapSet,
    intrinsic::TypedArrays,
    intrinsic::Promise,
    intrinsic::WeakRef,
);

/// Run `code` as a classic script in a fresh runtime and context, with the
/// parsed `input` bound to the global `input`, and return its completion
/// value as JSON.
///
/// `now` is a monotonic time source (the host's clock): the deadline is
/// `now() + limits.time`, checked by QuickJS's interrupt handler and between
/// promise jobs. Nothing else of the host is reachable from the script.
pub fn run_script(
    code: &str,
    input: &serde_json::Value,
    limits: &JsLimits,
    now: impl Fn() -> Duration + 'static,
) -> Result<JsOutput, JsError> {
    if code.len() > limits.code_bytes {
        return Err(JsError::CodeTooLarge {
            len: code.len(),
            limit: limits.code_bytes,
        });
    }
    let input_json = serde_json::to_string(input).map_err(|e| JsError::Engine {
        message: format!("could not serialise the input: {e}"),
    })?;
    if input_json.len() > limits.input_bytes {
        return Err(JsError::InputTooLarge {
            len: input_json.len(),
            limit: limits.input_bytes,
        });
    }

    let now: Rc<dyn Fn() -> Duration> = Rc::new(now);
    let started = now();
    let deadline = started.saturating_add(limits.time());
    let interrupted = Rc::new(Cell::new(false));

    let runtime = Runtime::new().map_err(engine_error)?;
    runtime.set_memory_limit(limits.heap_bytes);
    runtime.set_max_stack_size(limits.stack_bytes);
    {
        let now = now.clone();
        let interrupted = interrupted.clone();
        runtime.set_interrupt_handler(Some(Box::new(move || {
            if interrupted.get() || now() >= deadline {
                interrupted.set(true);
                true
            } else {
                false
            }
        })));
    }
    let context = Context::custom::<Intrinsics>(&runtime).map_err(|e| match e {
        rquickjs::Error::Allocation => JsError::MemoryLimit {
            limit_bytes: limits.heap_bytes,
        },
        other => engine_error(other),
    })?;

    let run = Run {
        limits,
        interrupted: &interrupted,
    };
    // Phase 1: bind the input and evaluate the script.
    let outcome = (|| {
        let value = context.with(|ctx| {
            run.evaluate(&ctx, code, &input_json)
                .map(|v| Persistent::save(&ctx, v))
        })?;
        // Phase 2: run promise jobs (async functions, `.then`) to the end,
        // within the same deadline. There are no timers and no I/O, so every
        // job was queued by the script itself.
        let heap_exhausted = run.drain_jobs(&runtime, &*now, deadline)?;
        // Phase 3: settle a promise result and convert it to JSON.
        context.with(|ctx| {
            let value = value.restore(&ctx).map_err(engine_error)?;
            let value = run.settle(&ctx, value, heap_exhausted)?;
            run.to_json(&ctx, value)
        })
    })();
    // Drop the context before the runtime; the handler goes with the runtime.
    drop(context);
    drop(runtime);
    let (value, json_bytes) = outcome?;
    Ok(JsOutput {
        value,
        json_bytes,
        elapsed: now().saturating_sub(started),
    })
}

fn engine_error(e: rquickjs::Error) -> JsError {
    JsError::Engine {
        message: e.to_string(),
    }
}

/// One execution: the limits and the deadline flag shared with the handler.
struct Run<'a> {
    limits: &'a JsLimits,
    interrupted: &'a Cell<bool>,
}

impl Run<'_> {
    fn time_limit(&self) -> JsError {
        JsError::TimeLimit {
            limit_ms: self.limits.time_ms,
        }
    }

    fn evaluate<'js>(
        &self,
        ctx: &Ctx<'js>,
        code: &str,
        input_json: &str,
    ) -> Result<Value<'js>, JsError> {
        let input = ctx
            .json_parse(input_json)
            .catch(ctx)
            .map_err(|e| self.classify(e))?;
        ctx.globals()
            .set("input", input)
            .catch(ctx)
            .map_err(|e| self.classify(e))?;
        let mut options = rquickjs::context::EvalOptions::default();
        options.global = true;
        options.strict = false;
        ctx.eval_with_options(code, options)
            .catch(ctx)
            .map_err(|e| self.classify(e))
    }

    /// Execute pending jobs until none is left. A job that hit a limit ends
    /// the call with that limit's error; an ordinary exception in a job is
    /// what an unhandled rejection is, and the run goes on.
    ///
    /// Answers whether the heap came near its limit while jobs ran: QuickJS
    /// can drop a promise reaction it cannot allocate without raising
    /// anything, which leaves the script's promise pending forever. The heap
    /// is sampled every [`HEAP_SAMPLE_JOBS`] jobs and once at the end.
    fn drain_jobs(
        &self,
        runtime: &Runtime,
        now: &dyn Fn() -> Duration,
        deadline: Duration,
    ) -> Result<bool, JsError> {
        let limit = self.limits.heap_bytes as u64;
        let near_limit = |runtime: &Runtime| {
            let used = u64::try_from(runtime.memory_usage().malloc_size).unwrap_or(0);
            used.saturating_mul(10) >= limit.saturating_mul(9)
        };
        let mut exhausted = false;
        let mut jobs = 0u64;
        loop {
            if self.interrupted.get() || now() >= deadline {
                return Err(self.time_limit());
            }
            match runtime.execute_pending_job() {
                Ok(false) => return Ok(exhausted || near_limit(runtime)),
                Ok(true) => {
                    jobs += 1;
                    if jobs.is_multiple_of(HEAP_SAMPLE_JOBS) && !exhausted {
                        exhausted = near_limit(runtime);
                    }
                }
                Err(job) => {
                    // A promise job catches its handler's exceptions into a
                    // rejection, so a job itself fails only inside the engine:
                    // the deadline, the stack, or an allocation so far past
                    // the heap limit that not even the error object (leaving
                    // `null`) could be made.
                    let (error, no_object) = job.0.with(|ctx| {
                        let caught = ctx.catch();
                        let no_object = caught.is_null() || caught.is_undefined();
                        (self.describe(caught), no_object)
                    });
                    if self.interrupted.get() {
                        return Err(self.time_limit());
                    }
                    if matches!(
                        error,
                        JsError::MemoryLimit { .. } | JsError::StackLimit { .. }
                    ) {
                        return Err(error);
                    }
                    if no_object {
                        return Err(JsError::MemoryLimit {
                            limit_bytes: self.limits.heap_bytes,
                        });
                    }
                }
            }
        }
    }

    /// A promise result is replaced by what it settled with.
    fn settle<'js>(
        &self,
        ctx: &Ctx<'js>,
        value: Value<'js>,
        heap_exhausted: bool,
    ) -> Result<Value<'js>, JsError> {
        let Some(promise) = value.as_promise() else {
            return Ok(value);
        };
        match promise.result::<Value<'js>>() {
            None if heap_exhausted => Err(JsError::MemoryLimit {
                limit_bytes: self.limits.heap_bytes,
            }),
            None => Err(JsError::NotJson {
                reason: "the result is a promise that never settled; run_javascript has no \
                         timers or I/O, so only synchronous work and promise chains complete"
                    .into(),
            }),
            Some(settled) => settled.catch(ctx).map_err(|e| self.classify(e)),
        }
    }

    fn to_json<'js>(
        &self,
        ctx: &Ctx<'js>,
        value: Value<'js>,
    ) -> Result<(serde_json::Value, usize), JsError> {
        if value.is_undefined() {
            return Ok((serde_json::Value::Null, 4));
        }
        if value.is_function() || value.is_symbol() {
            return Err(JsError::NotJson {
                reason: format!(
                    "a {} has no JSON form; return data (objects, arrays, strings, numbers, booleans, null)",
                    value.type_name()
                ),
            });
        }
        let text = ctx
            .json_stringify(value)
            .catch(ctx)
            .map_err(|e| match self.classify(e) {
                JsError::Thrown { name, message, .. } if name == "TypeError" => JsError::NotJson {
                    reason: format!("JSON.stringify failed: {message}"),
                },
                other => other,
            })?;
        if self.interrupted.get() {
            return Err(self.time_limit());
        }
        let Some(text) = text else {
            return Ok((serde_json::Value::Null, 4));
        };
        let text = text.to_string().map_err(engine_error)?;
        if text.len() > self.limits.output_bytes {
            return Err(JsError::OutputTooLarge {
                len: text.len(),
                limit: self.limits.output_bytes,
            });
        }
        let parsed = serde_json::from_str(&text).map_err(|e| JsError::NotJson {
            reason: format!("the JSON text could not be read back: {e}"),
        })?;
        Ok((parsed, text.len()))
    }

    /// Map a caught JavaScript error to the typed error. The deadline flag
    /// decides time; the engine's own messages decide memory and stack.
    fn classify(&self, caught: CaughtError<'_>) -> JsError {
        if self.interrupted.get() {
            return self.time_limit();
        }
        match caught {
            CaughtError::Error(rquickjs::Error::Allocation) => JsError::MemoryLimit {
                limit_bytes: self.limits.heap_bytes,
            },
            CaughtError::Error(e) => engine_error(e),
            CaughtError::Exception(ex) => self.describe(ex.into_value()),
            CaughtError::Value(v) => self.describe(v),
        }
    }

    fn describe(&self, value: Value<'_>) -> JsError {
        let (name, message, stack) = match value.as_object() {
            Some(obj) => {
                let name: Option<String> = obj.get("name").ok();
                let message: Option<String> = obj.get("message").ok();
                let stack: Option<String> = obj.get("stack").ok();
                match (name, message) {
                    (Some(n), Some(m)) => (clip(n), clip(m), stack.map(clip)),
                    _ => (
                        "non-Error value".to_owned(),
                        self.display(&value).unwrap_or_else(|| "an object".into()),
                        None,
                    ),
                }
            }
            None => (
                "non-Error value".to_owned(),
                self.display(&value)
                    .unwrap_or_else(|| value.type_name().to_owned()),
                None,
            ),
        };
        match (name.as_str(), message.as_str()) {
            ("InternalError", "out of memory") => JsError::MemoryLimit {
                limit_bytes: self.limits.heap_bytes,
            },
            ("RangeError", "Maximum call stack size exceeded") => JsError::StackLimit {
                limit_bytes: self.limits.stack_bytes,
            },
            ("InternalError", m) if m.starts_with("stack overflow") => JsError::StackLimit {
                limit_bytes: self.limits.stack_bytes,
            },
            ("SyntaxError", _) => JsError::Syntax { message },
            _ => JsError::Thrown {
                name,
                message,
                stack,
            },
        }
    }

    fn display(&self, value: &Value<'_>) -> Option<String> {
        let s: rquickjs::Coerced<String> = value.get().ok()?;
        Some(clip(s.0))
    }
}

/// `text` cut to at most [`ERROR_TEXT_BYTES`] (on a character boundary)
/// plus `…` when it was longer.
fn clip(mut text: String) -> String {
    if text.len() > ERROR_TEXT_BYTES {
        let mut cut = ERROR_TEXT_BYTES;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push('…');
    }
    text
}
