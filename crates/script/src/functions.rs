//! FUNCTION's interpreter and library registry (Redis's `functions.c` and
//! `function_lua.c`).
//!
//! A library's code runs once, at FUNCTION LOAD, with globals that hold
//! only `redis.register_function`, `redis.log` and the version fields (any
//! other global is Redis's nonexistent-global error); the functions it
//! registers then run at FCALL with the ordinary sandbox. The registry is
//! rebuilt from source on every worker: the server broadcasts each change
//! (load, delete, flush, restore) and each worker's engine applies it to
//! its own VM, so all workers hold the same libraries.

use crate::eval::string_arrays;
use crate::host::with_run;
use crate::luaerr::{self, raise_table};
use crate::shebang::{parse_library_header, valid_name, ScriptFlags};
use crate::vm::{error_metatable, freeze_all, set_frozen, Vm, VmKind};
use crate::{api, Host, RunResult, ScriptError};
use mlua::{ChunkMode, Function, Lua, Result, Table, Value, Variadic};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};
use vireo_resp::ReplyBuf;

/// Name error Redis gives for bad library and function names alike.
const BAD_NAME: &str =
    "Library names can only contain letters, numbers, or underscores(_) and must be at least one character long";

/// A registered function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionInfo {
    /// Its name as registered.
    pub name: String,
    /// `description=` of the table form, if given.
    pub description: Option<String>,
    /// `flags=` of the table form.
    pub flags: ScriptFlags,
}

/// A loaded library.
#[derive(Debug, Clone)]
pub struct Library {
    /// `name=` of its header.
    pub name: String,
    /// The whole code as loaded (header included), for FUNCTION DUMP/LIST
    /// WITHCODE and for replaying on other workers.
    pub code: Vec<u8>,
    /// Its functions, in registration order.
    pub functions: Vec<FunctionInfo>,
    /// The compiled callbacks, parallel to `functions`.
    callbacks: Vec<Function>,
}

/// Functions registered while a library's code runs.
#[derive(Default)]
struct Registering {
    /// Registered so far.
    functions: Vec<(FunctionInfo, Function)>,
}

/// Whether a load is under way, and what it registered (VM app data).
#[derive(Default)]
struct LoadState(Option<Registering>);

/// One worker's FUNCTION engine.
pub struct FunctionEngine {
    /// The interpreter.
    vm: Vm,
    /// Metatable of the globals; its `__index` is swapped during loads.
    globals_meta: Table,
    /// The real globals (the sandbox functions run with).
    runtime_api: Table,
    /// The globals a library's code sees while loading.
    load_api: Table,
    /// Libraries by name.
    libraries: BTreeMap<String, Library>,
    /// Lowercase function name → library name (names are case-insensitive).
    functions: HashMap<String, String>,
    /// Lua heap limit given at creation.
    memory_limit: usize,
}

impl FunctionEngine {
    /// A fresh engine with no libraries.
    pub fn new(memory_limit: usize) -> std::result::Result<FunctionEngine, String> {
        Self::build(memory_limit).map_err(|e| e.to_string())
    }

    /// Builds the VM and the load-time and runtime globals.
    fn build(memory_limit: usize) -> Result<FunctionEngine> {
        let vm = Vm::new(VmKind::Functions, memory_limit)?;
        let lua = &vm.lua;
        lua.set_app_data(LoadState::default());
        let load_api = load_api_table(lua)?;
        let runtime_api = lua.globals();
        let globals = lua.create_table()?;
        let globals_meta = lua.create_table()?;
        globals_meta.raw_set("__index", runtime_api.clone())?;
        globals.set_metatable(Some(globals_meta.clone()));
        set_frozen(lua, &globals_meta, true)?;
        set_frozen(lua, &globals, true)?;
        // SAFETY: `exec_raw` pushes `globals` (a table) as the only
        // argument; `lua_replace` pops it into the globals slot of the main
        // thread, which is what Redis does to give functions a fresh,
        // protected global table. Nothing here allocates or raises.
        unsafe {
            lua.exec_raw::<()>(globals, |state| {
                mlua::ffi::lua_replace(state, mlua::ffi::LUA_GLOBALSINDEX);
            })?;
        }
        Ok(FunctionEngine {
            vm,
            globals_meta,
            runtime_api,
            load_api,
            libraries: BTreeMap::new(),
            functions: HashMap::new(),
            memory_limit,
        })
    }

    /// FUNCTION LOAD [REPLACE]: compiles `code` (which must start with
    /// `#!lua name=<lib>`), runs it once to register its functions (for at
    /// most `timeout`), and installs the library. Returns the library name;
    /// errors are reply texts (`ERR Library 'x' already exists`, `ERR
    /// Error registering functions: ...`).
    pub fn load(
        &mut self,
        code: &[u8],
        replace: bool,
        timeout: Duration,
        host: &mut dyn Host,
    ) -> std::result::Result<String, String> {
        let header = parse_library_header(code)?;
        if !valid_name(&header.name) {
            return Err(format!("ERR {BAD_NAME}"));
        }
        let name = String::from_utf8_lossy(&header.name).into_owned();
        if !header.engine.eq_ignore_ascii_case(b"lua") {
            return Err(format!(
                "ERR Engine '{}' not found",
                String::from_utf8_lossy(&header.engine)
            ));
        }
        if self.libraries.contains_key(&name) && !replace {
            return Err(format!("ERR Library '{name}' already exists"));
        }
        let registered = self.register(&code[header.code_start..], timeout, host)?;
        if registered.is_empty() {
            return Err("ERR No functions registered".to_owned());
        }
        for (info, _) in &registered {
            match self.functions.get(&info.name.to_ascii_lowercase()) {
                Some(owner) if *owner != name => {
                    return Err(format!("ERR Function {} already exists", info.name))
                }
                _ => {}
            }
        }
        self.delete(&name);
        let (functions, callbacks): (Vec<_>, Vec<_>) = registered.into_iter().unzip();
        for f in &functions {
            self.functions
                .insert(f.name.to_ascii_lowercase(), name.clone());
        }
        self.libraries.insert(
            name.clone(),
            Library {
                name: name.clone(),
                code: code.to_vec(),
                functions,
                callbacks,
            },
        );
        Ok(name)
    }

    /// Compiles and runs library code in the load context; returns what it
    /// registered.
    fn register(
        &mut self,
        code: &[u8],
        timeout: Duration,
        host: &mut dyn Host,
    ) -> std::result::Result<Vec<(FunctionInfo, Function)>, String> {
        let lua = &self.vm.lua;
        let chunk = lua
            .load(code)
            .set_name("@user_function")
            .set_mode(ChunkMode::Text)
            .into_function()
            .map_err(|e| {
                format!(
                    "ERR Error compiling function: {}",
                    luaerr::plain_message(&e)
                )
            })?;
        self.set_globals_index(&self.load_api.clone())
            .map_err(|e| e.to_string())?;
        if let Some(mut load) = lua.app_data_mut::<LoadState>() {
            load.0 = Some(Registering::default());
        }
        let deadline = (!timeout.is_zero()).then(|| Instant::now() + timeout);
        with_run(lua, |s| s.load_deadline = deadline);
        let result = self.vm.run_load(&chunk, host);
        with_run(lua, |s| s.load_deadline = None);
        let registered = lua.app_data_mut::<LoadState>().and_then(|mut l| l.0.take());
        self.set_globals_index(&self.runtime_api.clone())
            .map_err(|e| e.to_string())?;
        result.map_err(|msg| format!("ERR Error registering functions: {msg}"))?;
        Ok(registered.map(|r| r.functions).unwrap_or_default())
    }

    /// Points the globals' `__index` at `target`.
    fn set_globals_index(&self, target: &Table) -> Result<()> {
        let lua = &self.vm.lua;
        set_frozen(lua, &self.globals_meta, false)?;
        let result = self.globals_meta.raw_set("__index", target.clone());
        set_frozen(lua, &self.globals_meta, true)?;
        result
    }

    /// FUNCTION DELETE: removes a library; false if there is none.
    pub fn delete(&mut self, library: &str) -> bool {
        let Some(lib) = self.libraries.remove(library) else {
            return false;
        };
        for f in &lib.functions {
            self.functions.remove(&f.name.to_ascii_lowercase());
        }
        true
    }

    /// FUNCTION FLUSH: removes every library and starts a new VM.
    pub fn flush(&mut self) -> std::result::Result<(), String> {
        *self = FunctionEngine::new(self.memory_limit)?;
        Ok(())
    }

    /// The libraries, by name.
    pub fn libraries(&self) -> impl Iterator<Item = &Library> {
        self.libraries.values()
    }

    /// A library by name.
    pub fn library(&self, name: &str) -> Option<&Library> {
        self.libraries.get(name)
    }

    /// A function by name (any letter case) and its library.
    pub fn function(&self, name: &[u8]) -> Option<(&Library, &FunctionInfo)> {
        let lib = self.libraries.get(
            self.functions
                .get(&String::from_utf8_lossy(name).to_ascii_lowercase())?,
        )?;
        let info = lib
            .functions
            .iter()
            .find(|f| f.name.as_bytes().eq_ignore_ascii_case(name))?;
        Some((lib, info))
    }

    /// Number of functions (INFO `number_of_functions`).
    pub fn function_count(&self) -> usize {
        self.functions.len()
    }

    /// Number of libraries (INFO `number_of_libraries`).
    pub fn library_count(&self) -> usize {
        self.libraries.len()
    }

    /// Bytes of the Lua heap (INFO `used_memory_vm_functions`).
    pub fn vm_memory(&self) -> usize {
        self.vm.used_memory()
    }

    /// FCALL: runs function `name` as `f(keys, args)` and writes its reply
    /// to `out`; `ERR Function not found` if there is none.
    pub fn call(
        &mut self,
        name: &[u8],
        keys: &[&[u8]],
        args: &[&[u8]],
        host: &mut dyn Host,
        out: &mut ReplyBuf,
    ) -> RunResult {
        let (lib, info) = self
            .function(name)
            .ok_or_else(|| ScriptError::plain("ERR Function not found".to_owned()))?;
        let index = lib
            .functions
            .iter()
            .position(|f| f.name == info.name)
            .unwrap_or(0);
        let callback = lib.callbacks[index].clone();
        let fname = info.name.clone();
        let lua = &self.vm.lua;
        let tables = string_arrays(lua, keys, args)
            .map_err(|e| ScriptError::plain(format!("ERR {}", luaerr::plain_message(&e))))?;
        self.vm.run(&callback, Some(tables), &fname, host, out)
    }
}

/// The globals of the load context: `redis` with `register_function`,
/// `log`, the `LOG_*` levels and the version fields; both tables raise the
/// nonexistent-global error for anything else, and are frozen.
fn load_api_table(lua: &Lua) -> Result<Table> {
    let redis = lua.create_table()?;
    redis.raw_set("register_function", lua.create_function(register_function)?)?;
    api::register_log(lua, &redis)?;
    api::register_version(&redis)?;
    redis.set_metatable(Some(error_metatable(lua)?));
    let globals = lua.create_table()?;
    globals.raw_set("redis", redis)?;
    globals.set_metatable(Some(error_metatable(lua)?));
    freeze_all(lua, &globals)?;
    Ok(globals)
}

/// `redis.register_function(name, fn)` or `redis.register_function{...}`.
fn register_function(lua: &Lua, args: Variadic<Value>) -> Result<()> {
    let loading = lua
        .app_data_ref::<LoadState>()
        .is_some_and(|l| l.0.is_some());
    if !loading {
        return Err(raise_table(
            b"redis.register_function can only be called on FUNCTION LOAD command",
        ));
    }
    let (info, callback) = match args.len() {
        1 => named_args(&args[0])?,
        2 => positional_args(&args)?,
        _ => {
            return Err(raise_table(
                b"wrong number of arguments to redis.register_function",
            ))
        }
    };
    if !valid_name(info.name.as_bytes()) {
        return Err(raise_table(BAD_NAME.as_bytes()));
    }
    let mut load = lua.app_data_mut::<LoadState>();
    let registering = load
        .as_deref_mut()
        .and_then(|l| l.0.as_mut())
        .ok_or_else(|| {
            raise_table(b"redis.register_function can only be called on FUNCTION LOAD command")
        })?;
    if registering
        .functions
        .iter()
        .any(|(f, _)| f.name == info.name)
    {
        return Err(raise_table(b"Function already exists in the library"));
    }
    registering.functions.push((info, callback));
    Ok(())
}

/// `lua_isstring` + `lua_tostring` for register_function's fields.
fn string_of(v: &Value) -> Option<String> {
    luaerr::to_bytes(Some(v)).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// The `(name, callback)` form.
fn positional_args(args: &[Value]) -> Result<(FunctionInfo, Function)> {
    let name = string_of(&args[0]).ok_or_else(|| {
        raise_table(b"first argument to redis.register_function must be a string")
    })?;
    let Value::Function(f) = &args[1] else {
        return Err(raise_table(
            b"second argument to redis.register_function must be a function",
        ));
    };
    Ok((
        FunctionInfo {
            name,
            description: None,
            flags: ScriptFlags::default(),
        },
        f.clone(),
    ))
}

/// The `{function_name=, callback=, flags=, description=}` form.
fn named_args(arg: &Value) -> Result<(FunctionInfo, Function)> {
    let Value::Table(t) = arg else {
        return Err(raise_table(b"calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments)."));
    };
    let mut name = None;
    let mut description = None;
    let mut callback = None;
    let mut flags = ScriptFlags::default();
    for pair in t.clone().pairs::<Value, Value>() {
        let (k, v) = pair?;
        let Some(key) = string_of(&k) else {
            return Err(raise_table(
                b"named argument key given to redis.register_function is not a string",
            ));
        };
        match key.to_ascii_lowercase().as_str() {
            "function_name" => {
                name = Some(string_of(&v).ok_or_else(|| {
                    raise_table(
                        b"function_name argument given to redis.register_function must be a string",
                    )
                })?);
            }
            "description" => {
                description = Some(string_of(&v).ok_or_else(|| {
                    raise_table(
                        b"description argument given to redis.register_function must be a string",
                    )
                })?);
            }
            "callback" => {
                match v {
                    Value::Function(f) => callback = Some(f),
                    _ => return Err(raise_table(
                        b"callback argument given to redis.register_function must be a function",
                    )),
                }
            }
            "flags" => {
                let Value::Table(list) = v else {
                    return Err(raise_table(b"flags argument to redis.register_function must be a table representing function flags"));
                };
                flags = read_flags(&list)?;
            }
            _ => {
                return Err(raise_table(
                    b"unknown argument given to redis.register_function",
                ))
            }
        }
    }
    let name = name
        .ok_or_else(|| raise_table(b"redis.register_function must get a function name argument"))?;
    let callback = callback
        .ok_or_else(|| raise_table(b"redis.register_function must get a callback argument"))?;
    Ok((
        FunctionInfo {
            name,
            description,
            flags,
        },
        callback,
    ))
}

/// `flags={...}`: strings naming flags (any case), up to the first nil.
fn read_flags(list: &Table) -> Result<ScriptFlags> {
    let mut flags = ScriptFlags::default();
    for i in 1.. {
        let v: Value = list.get(i)?;
        if v.is_nil() {
            break;
        }
        let ok = luaerr::to_bytes(Some(&v)).is_some_and(|name| flags.set(&name, true));
        if !ok {
            return Err(raise_table(b"unknown flag given"));
        }
    }
    Ok(flags)
}
