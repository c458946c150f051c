// The server-side JavaScript API of stored procedures and triggers, as the service offers it:
// getContext() with the collection, request and response; the collection's document
// operations with their callbacks and "accepted" return values; console.log; ErrorCodes;
// and `__`, the collection with the fluent query API.
//
// Everything that touches data goes through one native function, `host(op, json)`, which
// answers with JSON: {"accepted": false} when the script's budget is spent (the operation did
// not run), {"error": {...}} or {"result": ..., "options": ...}. Callbacks run after the
// calling function returns, from a queue, as the service runs them — so a script that chains
// thousands of operations through callbacks does not grow the stack.
//
// Evaluated once per sandbox: the outer function takes the host and returns the function
// that starts one execution, which installs fresh globals and state.
(function (host) {
  "use strict";
  return function (setup) {
    var queue = [];
    var logs = [];
    var requestBody = setup.requestBody;
    var responseBody = setup.responseBody;
    var requestHeaders = {};
    var responseHeaders = {};

    globalThis.ErrorCodes = {
      BadRequest: 400, Unauthorized: 401, Forbidden: 403, NotFound: 404,
      MethodNotAllowed: 405, RequestTimeout: 408, Conflict: 409, Gone: 410,
      PreconditionFailed: 412, RequestEntityTooLarge: 413, TooManyRequests: 429,
      RetryWith: 449, InternalServerError: 500, ServiceUnavailable: 503,
      NotAccepted: 499
    };

    function fail(status, message) {
      var e = new Error(message);
      e.number = status;
      return e;
    }

    // Runs one operation; queues its callback; says whether it was accepted.
    function call(op, args, callback, shape) {
      if (callback !== undefined && typeof callback !== "function") {
        throw fail(400, "The callback of " + op + " must be a function.");
      }
      var r = JSON.parse(host(op, JSON.stringify(args)));
      if (!r.accepted) return false;
      queue.push(function () {
        if (r.error) {
          var e = fail(r.error.number, r.error.message);
          e.body = r.error.body;
          if (callback) callback(e); else throw e;
          return;
        }
        if (!callback) return;
        if (shape === "options") callback(undefined, r.options);
        else callback(undefined, r.result, r.options);
      });
      return true;
    }

    // (link, body?, options?, callback?) with options and callback optional.
    function split(options, callback) {
      if (typeof options === "function") return [{}, options];
      return [options || {}, callback];
    }

    function link(l, what) {
      if (typeof l !== "string" && !(l && typeof l._self === "string")) {
        throw fail(400, "The " + what + " link must be a string.");
      }
      return typeof l === "string" ? l : l._self;
    }

    var collection = {
      getSelfLink: function () { return setup.selfLink; },
      getAltLink: function () { return setup.altLink; },
      createDocument: function (coll, doc, options, callback) {
        var oc = split(options, callback);
        return call("create", { link: link(coll, "collection"), body: doc, options: oc[0] }, oc[1]);
      },
      upsertDocument: function (coll, doc, options, callback) {
        var oc = split(options, callback);
        return call("upsert", { link: link(coll, "collection"), body: doc, options: oc[0] }, oc[1]);
      },
      replaceDocument: function (docLink, doc, options, callback) {
        var oc = split(options, callback);
        return call("replace", { link: link(docLink, "document"), body: doc, options: oc[0] }, oc[1]);
      },
      readDocument: function (docLink, options, callback) {
        var oc = split(options, callback);
        return call("read", { link: link(docLink, "document"), options: oc[0] }, oc[1]);
      },
      deleteDocument: function (docLink, options, callback) {
        var oc = split(options, callback);
        return call("delete", { link: link(docLink, "document"), options: oc[0] }, oc[1], "options");
      },
      patchDocument: function (docLink, operations, options, callback) {
        var oc = split(options, callback);
        return call("patch", { link: link(docLink, "document"), operations: operations, options: oc[0] }, oc[1]);
      },
      queryDocuments: function (coll, query, options, callback) {
        var oc = split(options, callback);
        var spec = typeof query === "string" ? { query: query } : query;
        if (!spec || typeof spec.query !== "string") {
          throw fail(400, "queryDocuments needs a query string or {query, parameters}.");
        }
        return call("query", { link: link(coll, "collection"), query: spec.query,
                               parameters: spec.parameters || [], options: oc[0] }, oc[1]);
      },
      readDocuments: function (coll, options, callback) {
        var oc = split(options, callback);
        return call("query", { link: link(coll, "collection"), query: "SELECT * FROM root",
                               parameters: [], options: oc[0] }, oc[1]);
      }
    };

    // The fluent query API (`__.filter(...)`, `__.chain()...value()`): steps over the
    // documents of the logical partition.
    function Chain(steps) { this.steps = steps; }
    function step(kind) {
      return function (fn, options, callback) {
        var c = new Chain(this.steps.concat([{ kind: kind, fn: fn }]));
        return c;
      };
    }
    Chain.prototype.filter = step("filter");
    Chain.prototype.map = step("map");
    Chain.prototype.pluck = step("pluck");
    Chain.prototype.flatten = step("flatten");
    Chain.prototype.sortBy = step("sortBy");
    Chain.prototype.sortByDescending = step("sortByDescending");
    Chain.prototype.value = function (options, callback) {
      var oc = split(options, callback);
      var steps = this.steps;
      var r = JSON.parse(host("query", JSON.stringify({
        link: setup.selfLink, query: "SELECT * FROM root", parameters: [],
        options: { pageSize: -1 } })));
      if (!r.accepted) return { isAccepted: false };
      queue.push(function () {
        if (r.error) {
          var e = fail(r.error.number, r.error.message);
          if (oc[1]) oc[1](e); else throw e;
          return;
        }
        var items = r.result;
        for (var i = 0; i < steps.length; i++) items = apply(steps[i], items);
        if (oc[1]) oc[1](undefined, items, {});
      });
      return { isAccepted: true };
    };
    function key(fn, x) { return typeof fn === "function" ? fn(x) : x[fn]; }
    function apply(s, items) {
      switch (s.kind) {
        case "filter": return items.filter(function (x) { return s.fn(x); });
        case "map": return items.map(function (x) { return s.fn(x); });
        case "pluck": return items.map(function (x) { return x[s.fn]; });
        case "flatten": return items.reduce(function (a, x) {
          return a.concat(Array.isArray(x) ? x : [x]); }, []);
        case "sortBy":
        case "sortByDescending":
          var sign = s.kind === "sortBy" ? 1 : -1;
          return items.slice().sort(function (a, b) {
            var ka = key(s.fn, a), kb = key(s.fn, b);
            return ka < kb ? -sign : ka > kb ? sign : 0;
          });
      }
      return items;
    }
    collection.chain = function () { return new Chain([]); };
    ["filter", "map", "pluck", "flatten", "sortBy", "sortByDescending"].forEach(function (k) {
      collection[k] = function (fn, options, callback) {
        if (k === "flatten") { callback = options; options = fn; fn = undefined; }
        return new Chain([{ kind: k, fn: fn }]).value(options, callback);
      };
    });
    collection.value = function (options, callback) { return new Chain([]).value(options, callback); };

    var request = {
      getBody: function () { return requestBody; },
      setBody: function (b) { requestBody = b; },
      getValue: function (k) { return k === "Body" ? requestBody : requestHeaders[k]; },
      setValue: function (k, v) { if (k === "Body") requestBody = v; else requestHeaders[k] = v; },
      getOperationType: function () { return setup.operationType; },
      getMaxRequestBodySize: function () { return 2 * 1024 * 1024; }
    };
    var MAX_RESPONSE = 2 * 1024 * 1024;
    function size(b) {
      if (typeof b === "string") return b.length + 2;
      var s = JSON.stringify(b);
      return s === undefined ? 0 : s.length;
    }
    // As the service's setBody: a body past the limit throws 413 where it is set, so a
    // script may catch it (the host checks the final bytes again).
    function bounded(b) {
      var n = size(b);
      if (n > MAX_RESPONSE) {
        throw fail(413, "The response body would be " + n + " characters; a stored procedure may answer at most " + MAX_RESPONSE + " bytes (getMaxResponseBodySize()).");
      }
      return b;
    }
    var response = {
      getBody: function () { return responseBody; },
      setBody: function (b) { responseBody = bounded(b); },
      appendBody: function (s) { responseBody = bounded((responseBody === undefined ? "" : responseBody) + s); },
      getValue: function (k) { return k === "Body" ? responseBody : responseHeaders[k]; },
      setValue: function (k, v) { if (k === "Body") responseBody = bounded(v); else responseHeaders[k] = v; },
      appendValue: function (k, v) {
        if (k === "Body") response.appendBody(v);
        else responseHeaders[k] = (responseHeaders[k] === undefined ? "" : responseHeaders[k]) + v;
      },
      getMaxResponseBodySize: function () { return MAX_RESPONSE; },
      getCurrentResponseBodySize: function () { return size(responseBody); }
    };
    var context = {
      getCollection: function () { return collection; },
      getRequest: function () { return request; },
      getResponse: function () { return response; },
      abort: function (err) { throw err === undefined ? fail(400, "The script aborted.") : err; }
    };
    globalThis.getContext = function () { return context; };
    globalThis.__ = collection;
    __.getContext = globalThis.getContext;
    __.request = request;
    __.response = response;

    function format(args) {
      var fmt = args[0];
      var rest = Array.prototype.slice.call(args, 1);
      if (typeof fmt !== "string") fmt = String(fmt);
      var out = fmt.replace(/%[sdifoOj%]/g, function (m) {
        if (m === "%%") return "%";
        if (!rest.length) return m;
        var v = rest.shift();
        if (m === "%d" || m === "%i") return String(parseInt(v, 10));
        if (m === "%f") return String(parseFloat(v));
        if (m === "%o" || m === "%O" || m === "%j") return JSON.stringify(v);
        return String(v);
      });
      return rest.length ? out + " " + rest.map(String).join(" ") : out;
    }
    globalThis.console = {
      log: function () { logs.push(format(arguments)); }
    };
    console.info = console.warn = console.error = console.debug = console.log;

    // The host's side of the runtime: run the entry point, then every queued callback.
    return {
      run: function (fn, args) {
        fn.apply(context, args);
        while (queue.length) queue.shift()();
      },
      finish: function () {
        return JSON.stringify({
          response: responseBody, request: requestBody, log: logs.join("\n"),
          hasResponse: responseBody !== undefined
        });
      }
    };
  };
})
