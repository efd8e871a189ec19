'use strict';
// register(): one call for apps. Installs a ThreadContextManager as the global OpenTelemetry
// context manager, delegating to the manager already installed (if any) or to a new
// AsyncLocalStorageContextManager, enables it and returns it.
//
// With NodeSDK or NodeTracerProvider, pass a manager instead of calling register():
//   new NodeSDK({ contextManager: new ThreadContextManager(), ... }).start();
//   provider.register({ contextManager: new ThreadContextManager() });
// (both call enable() and install it globally).

const { context, ROOT_CONTEXT, createContextKey } = require('@opentelemetry/api');
const { ThreadContextManager, enabledThreadContextManager } = require('./context-manager');
const { prepareProcessContext } = require('./process-context');

const PROBE_KEY = createContextKey('otel-thread-ctx register probe');

// The API's no-op manager (what it returns when none is installed) cannot hold a context.
function holdsContexts(manager) {
  const probe = ROOT_CONTEXT.setValue(PROBE_KEY, true);
  try {
    return manager.with(probe, () => manager.active() === probe) === true;
  } catch {
    return false;
  }
}

function checkRegisterOptions(options) {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError(`options: expected an object, got ${options === null ? 'null' : typeof options}`);
  }
}

/**
 * @param {{ contextManager?: ContextManager, asyncTracking?: boolean, resource?: Resource,
 *   attributes?: string[] }} [options] resource / attributes: the OTEP 4719 process context's
 *   resource and the attribute keys records carry (js/process-context.js)
 * @returns {ThreadContextManager} the enabled, globally installed manager
 */
function register(options = {}) {
  checkRegisterOptions(options);
  const commitProcessContext = prepareProcessContext(options);
  const installed = typeof context._getContextManager === 'function' ? context._getContextManager() : undefined;
  if (installed instanceof ThreadContextManager && installed.enabled && options.contextManager === undefined) {
    commitProcessContext();
    return installed;
  }
  if (enabledThreadContextManager() !== null) {
    throw new Error('register(): a ThreadContextManager is already enabled on this thread; disable it first');
  }
  let delegate = options.contextManager;
  const wrapsInstalled = delegate === undefined && installed !== undefined &&
    !(installed instanceof ThreadContextManager) && holdsContexts(installed);
  if (wrapsInstalled) delegate = installed;
  // Validates the options before anything global changes.
  const manager = new ThreadContextManager({ contextManager: delegate, asyncTracking: options.asyncTracking });
  // Unregisters the installed manager (the API allows one registration); it lives on as our delegate.
  context.disable();
  manager.enable();
  if (!context.setGlobalContextManager(manager)) {
    manager.disable();
    throw new Error('register(): @opentelemetry/api refused to install the global context manager');
  }
  commitProcessContext();
  return manager;
}

module.exports = { register };
