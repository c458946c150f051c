//! Server-side JavaScript of a container: stored procedures (executed in one logical
//! partition as one transaction), triggers and user-defined functions.

use crate::client::{Request, seg};
use crate::{ContainerClient, Error, PartitionKey};
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use strata_query::protocol::header;

/// A stored procedure, trigger or UDF as stored (the trigger fields only on triggers).
///
/// ```
/// use strata_sdk::Script;
/// let s = Script::new("bulkDelete", "function (q) { /* ... */ }");
/// assert_eq!(s.id, "bulkDelete");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Script {
    /// The script's id.
    pub id: String,
    /// The JavaScript source: a function.
    pub body: String,
    /// Triggers only: `Pre` or `Post`.
    #[serde(
        rename = "triggerType",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub trigger_type: Option<TriggerType>,
    /// Triggers only: the operations it runs on.
    #[serde(
        rename = "triggerOperation",
        skip_serializing_if = "Option::is_none",
        default
    )]
    pub trigger_operation: Option<TriggerOperation>,
    /// The resource id (set by the server).
    #[serde(rename = "_rid", skip_serializing_if = "Option::is_none", default)]
    pub rid: Option<String>,
    /// The version tag (set by the server).
    #[serde(rename = "_etag", skip_serializing_if = "Option::is_none", default)]
    pub etag: Option<String>,
}

impl Script {
    /// A stored procedure or UDF.
    ///
    /// ```
    /// let udf = strata_sdk::Script::new("tax", "function (p) { return p * 0.2; }");
    /// assert!(udf.trigger_type.is_none());
    /// ```
    pub fn new(id: impl Into<String>, body: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            body: body.into(),
            trigger_type: None,
            trigger_operation: None,
            rid: None,
            etag: None,
        }
    }

    /// A trigger.
    ///
    /// ```
    /// use strata_sdk::{Script, TriggerOperation, TriggerType};
    /// let t = Script::trigger("stamp", "function () {}", TriggerType::Pre, TriggerOperation::Create);
    /// assert_eq!(t.trigger_type, Some(TriggerType::Pre));
    /// ```
    pub fn trigger(
        id: impl Into<String>,
        body: impl Into<String>,
        ty: TriggerType,
        op: TriggerOperation,
    ) -> Self {
        Self {
            trigger_type: Some(ty),
            trigger_operation: Some(op),
            ..Self::new(id, body)
        }
    }
}

/// When a trigger runs.
///
/// ```
/// assert_eq!(serde_json::to_string(&strata_sdk::TriggerType::Post).unwrap(), "\"Post\"");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TriggerType {
    /// Before the write; may change the incoming item.
    Pre,
    /// After the write, in its transaction.
    Post,
}

/// Which operations a trigger runs on.
///
/// ```
/// assert_eq!(serde_json::to_string(&strata_sdk::TriggerOperation::All).unwrap(), "\"All\"");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TriggerOperation {
    /// Every write.
    All,
    /// Creates.
    Create,
    /// Replaces (and patches).
    Replace,
    /// Deletes.
    Delete,
    /// Upserts.
    Upsert,
}

/// The three kinds of script, by their path segment.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Sproc,
    Trigger,
    Udf,
}

impl Kind {
    fn segment(self) -> &'static str {
        match self {
            Kind::Sproc => "sprocs",
            Kind::Trigger => "triggers",
            Kind::Udf => "udfs",
        }
    }

    fn feed_key(self) -> &'static str {
        match self {
            Kind::Sproc => "StoredProcedures",
            Kind::Trigger => "Triggers",
            Kind::Udf => "UserDefinedFunctions",
        }
    }
}

/// What a stored procedure returned.
///
/// ```no_run
/// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
/// let r = c.scripts().execute_stored_procedure::<u64>("count", "tenant1", &[], Default::default()).await?;
/// println!("{:?} for {} RU", r.value, r.request_charge);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct StoredProcedureResponse<T> {
    /// The response body the script set (`getContext().getResponse().setBody(...)`).
    pub value: Option<T>,
    /// Request units charged.
    pub request_charge: f64,
    /// The script's `console.log` output, when logging was asked for.
    pub log: Option<String>,
    /// The session token after the execution's writes.
    pub session_token: Option<String>,
}

/// Options of a stored procedure execution.
///
/// ```
/// let o = strata_sdk::ExecuteOptions { enable_script_logging: true };
/// # let _ = o;
/// ```
#[derive(Debug, Clone, Default)]
pub struct ExecuteOptions {
    /// Return the script's `console.log` lines.
    pub enable_script_logging: bool,
}

/// Stored procedures, triggers and UDFs of one container (from
/// [`ContainerClient::scripts`]).
///
/// ```no_run
/// # async fn f(c: strata_sdk::ContainerClient) -> Result<(), strata_sdk::Error> {
/// use strata_sdk::Script;
/// let scripts = c.scripts();
/// scripts.create_stored_procedure(&Script::new("hello", "function (n) { getContext().getResponse().setBody('hi ' + n); }")).await?;
/// let r = scripts.execute_stored_procedure::<String>("hello", "tenant1", &["ann".into()], Default::default()).await?;
/// assert_eq!(r.value.as_deref(), Some("hi ann"));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ScriptsClient {
    container: ContainerClient,
}

impl ScriptsClient {
    pub(crate) fn new(container: ContainerClient) -> Self {
        Self { container }
    }

    fn path(&self, kind: Kind, id: Option<&str>) -> String {
        match id {
            Some(id) => format!("{}/{}/{}", self.container.link, kind.segment(), seg(id)),
            None => format!("{}/{}", self.container.link, kind.segment()),
        }
    }

    async fn put(
        &self,
        kind: Kind,
        s: &Script,
        method: Method,
        upsert: bool,
    ) -> Result<Script, Error> {
        let body = serde_json::to_value(s).map_err(Error::serde)?;
        let path = if method == Method::PUT {
            self.path(kind, Some(&s.id))
        } else {
            self.path(kind, None)
        };
        let mut req = Request::new(method, path).json(&body);
        if upsert {
            req = req.header(header::IS_UPSERT, "True");
        }
        let r = self.container.client.send(req).await?;
        serde_json::from_slice(&r.body).map_err(Error::serde)
    }

    async fn read(&self, kind: Kind, id: &str) -> Result<Script, Error> {
        let r = self
            .container
            .client
            .send(Request::new(Method::GET, self.path(kind, Some(id))))
            .await?;
        serde_json::from_slice(&r.body).map_err(Error::serde)
    }

    async fn delete(&self, kind: Kind, id: &str) -> Result<(), Error> {
        self.container
            .client
            .send(Request::new(Method::DELETE, self.path(kind, Some(id))))
            .await
            .map(|_| ())
    }

    async fn list(&self, kind: Kind) -> Result<Vec<Script>, Error> {
        let r = self
            .container
            .client
            .send(Request::new(Method::GET, self.path(kind, None)))
            .await?;
        let v = r.json()?;
        serde_json::from_value(v[kind.feed_key()].clone()).map_err(Error::serde)
    }

    /// Creates a stored procedure (409 if the id is taken).
    ///
    /// ```no_run
    /// # async fn f(s: strata_sdk::ScriptsClient) -> Result<(), strata_sdk::Error> {
    /// s.create_stored_procedure(&strata_sdk::Script::new("p", "function () {}")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_stored_procedure(&self, s: &Script) -> Result<Script, Error> {
        self.put(Kind::Sproc, s, Method::POST, false).await
    }

    /// Creates or replaces a stored procedure.
    ///
    /// ```no_run
    /// # async fn f(s: strata_sdk::ScriptsClient) -> Result<(), strata_sdk::Error> {
    /// s.upsert_stored_procedure(&strata_sdk::Script::new("p", "function () {}")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn upsert_stored_procedure(&self, s: &Script) -> Result<Script, Error> {
        self.put(Kind::Sproc, s, Method::POST, true).await
    }

    /// Replaces a stored procedure's body (404 if it does not exist).
    ///
    /// ```no_run
    /// # async fn f(s: strata_sdk::ScriptsClient) -> Result<(), strata_sdk::Error> {
    /// s.replace_stored_procedure(&strata_sdk::Script::new("p", "function () { }")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn replace_stored_procedure(&self, s: &Script) -> Result<Script, Error> {
        self.put(Kind::Sproc, s, Method::PUT, false).await
    }

    /// Reads a stored procedure.
    ///
    /// ```no_run
    /// # async fn f(s: strata_sdk::ScriptsClient) -> Result<(), strata_sdk::Error> {
    /// println!("{}", s.read_stored_procedure("p").await?.body);
    /// # Ok(()) }
    /// ```
    pub async fn read_stored_procedure(&self, id: &str) -> Result<Script, Error> {
        self.read(Kind::Sproc, id).await
    }

    /// Deletes a stored procedure.
    ///
    /// ```no_run
    /// # async fn f(s: strata_sdk::ScriptsClient) -> Result<(), strata_sdk::Error> {
    /// s.delete_stored_procedure("p").await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete_stored_procedure(&self, id: &str) -> Result<(), Error> {
        self.delete(Kind::Sproc, id).await
    }

    /// Every stored procedure of the container.
    ///
    /// ```no_run
    /// # async fn f(s: strata_sdk::ScriptsClient) -> Result<(), strata_sdk::Error> {
    /// for p in s.list_stored_procedures().await? { println!("{}", p.id); }
    /// # Ok(()) }
    /// ```
    pub async fn list_stored_procedures(&self) -> Result<Vec<Script>, Error> {
        self.list(Kind::Sproc).await
    }

    /// Runs a stored procedure in the logical partition `pk` (a full key) with `args`, as
    /// one transaction: a throw rolls every write back and comes back as an error.
    ///
    /// ```no_run
    /// # async fn f(s: strata_sdk::ScriptsClient) -> Result<(), strata_sdk::Error> {
    /// use strata_sdk::{ExecuteOptions, PartitionKeyBuilder};
    /// let key = PartitionKeyBuilder::new().add("contoso").add("alice").add("s1").build();
    /// let opts = ExecuteOptions { enable_script_logging: true };
    /// let r = s.execute_stored_procedure::<serde_json::Value>("bulkDelete", key, &["SELECT * FROM c".into()], opts).await?;
    /// println!("{:?} {:?}", r.value, r.log);
    /// # Ok(()) }
    /// ```
    pub async fn execute_stored_procedure<T: DeserializeOwned>(
        &self,
        id: &str,
        pk: impl Into<PartitionKey>,
        args: &[Value],
        opts: ExecuteOptions,
    ) -> Result<StoredProcedureResponse<T>, Error> {
        let pk = pk.into();
        let mut req = Request::new(Method::POST, self.path(Kind::Sproc, Some(id)))
            .json(&Value::Array(args.to_vec()))
            .header(header::PARTITION_KEY, pk.to_header());
        if opts.enable_script_logging {
            req = req.header(header::SCRIPT_ENABLE_LOGGING, "true");
        }
        let r = self.container.client.send(req).await?;
        let value = if r.body.is_empty() {
            None
        } else {
            Some(serde_json::from_slice(&r.body).map_err(Error::serde)?)
        };
        let log = r.header(header::SCRIPT_LOG_RESULTS).map(|l| {
            percent_encoding::percent_decode_str(l)
                .decode_utf8_lossy()
                .into_owned()
        });
        Ok(StoredProcedureResponse {
            value,
            request_charge: r.charge(),
            log,
            session_token: r.header(header::SESSION_TOKEN).map(str::to_string),
        })
    }

    /// Creates a trigger (see [`Script::trigger`]).
    ///
    /// ```no_run
    /// # async fn f(s: strata_sdk::ScriptsClient) -> Result<(), strata_sdk::Error> {
    /// use strata_sdk::{Script, TriggerOperation, TriggerType};
    /// s.create_trigger(&Script::trigger("stamp", "function () {}", TriggerType::Pre, TriggerOperation::All)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_trigger(&self, t: &Script) -> Result<Script, Error> {
        self.put(Kind::Trigger, t, Method::POST, false).await
    }

    /// Replaces a trigger.
    ///
    /// ```no_run
    /// # async fn f(s: strata_sdk::ScriptsClient, t: strata_sdk::Script) -> Result<(), strata_sdk::Error> {
    /// s.replace_trigger(&t).await?;
    /// # Ok(()) }
    /// ```
    pub async fn replace_trigger(&self, t: &Script) -> Result<Script, Error> {
        self.put(Kind::Trigger, t, Method::PUT, false).await
    }

    /// Reads a trigger.
    ///
    /// ```no_run
    /// # async fn f(s: strata_sdk::ScriptsClient) -> Result<(), strata_sdk::Error> {
    /// println!("{:?}", s.read_trigger("stamp").await?.trigger_type);
    /// # Ok(()) }
    /// ```
    pub async fn read_trigger(&self, id: &str) -> Result<Script, Error> {
        self.read(Kind::Trigger, id).await
    }

    /// Deletes a trigger.
    ///
    /// ```no_run
    /// # async fn f(s: strata_sdk::ScriptsClient) -> Result<(), strata_sdk::Error> {
    /// s.delete_trigger("stamp").await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete_trigger(&self, id: &str) -> Result<(), Error> {
        self.delete(Kind::Trigger, id).await
    }

    /// Every trigger of the container.
    ///
    /// ```no_run
    /// # async fn f(s: strata_sdk::ScriptsClient) -> Result<(), strata_sdk::Error> {
    /// println!("{}", s.list_triggers().await?.len());
    /// # Ok(()) }
    /// ```
    pub async fn list_triggers(&self) -> Result<Vec<Script>, Error> {
        self.list(Kind::Trigger).await
    }

    /// Creates a user-defined function, callable in queries as `udf.<id>(...)`.
    ///
    /// ```no_run
    /// # async fn f(s: strata_sdk::ScriptsClient) -> Result<(), strata_sdk::Error> {
    /// s.create_user_defined_function(&strata_sdk::Script::new("tax", "function (p) { return p * 0.2; }")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn create_user_defined_function(&self, u: &Script) -> Result<Script, Error> {
        self.put(Kind::Udf, u, Method::POST, false).await
    }

    /// Replaces a user-defined function (queries use the new body at once).
    ///
    /// ```no_run
    /// # async fn f(s: strata_sdk::ScriptsClient) -> Result<(), strata_sdk::Error> {
    /// s.replace_user_defined_function(&strata_sdk::Script::new("tax", "function (p) { return p * 0.25; }")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn replace_user_defined_function(&self, u: &Script) -> Result<Script, Error> {
        self.put(Kind::Udf, u, Method::PUT, false).await
    }

    /// Reads a user-defined function.
    ///
    /// ```no_run
    /// # async fn f(s: strata_sdk::ScriptsClient) -> Result<(), strata_sdk::Error> {
    /// println!("{}", s.read_user_defined_function("tax").await?.body);
    /// # Ok(()) }
    /// ```
    pub async fn read_user_defined_function(&self, id: &str) -> Result<Script, Error> {
        self.read(Kind::Udf, id).await
    }

    /// Deletes a user-defined function.
    ///
    /// ```no_run
    /// # async fn f(s: strata_sdk::ScriptsClient) -> Result<(), strata_sdk::Error> {
    /// s.delete_user_defined_function("tax").await?;
    /// # Ok(()) }
    /// ```
    pub async fn delete_user_defined_function(&self, id: &str) -> Result<(), Error> {
        self.delete(Kind::Udf, id).await
    }

    /// Every user-defined function of the container.
    ///
    /// ```no_run
    /// # async fn f(s: strata_sdk::ScriptsClient) -> Result<(), strata_sdk::Error> {
    /// println!("{}", s.list_user_defined_functions().await?.len());
    /// # Ok(()) }
    /// ```
    pub async fn list_user_defined_functions(&self) -> Result<Vec<Script>, Error> {
        self.list(Kind::Udf).await
    }
}

/// A container's scripts.
impl crate::ContainerClient {
    /// The container's stored procedures, triggers and user-defined functions.
    ///
    /// ```
    /// # let c = strata_sdk::CosmosClient::new("http://127.0.0.1:8081/", strata_sdk::EMULATOR_KEY).unwrap();
    /// let scripts = c.database("d").container("events").scripts();
    /// # let _ = scripts;
    /// ```
    pub fn scripts(&self) -> crate::ScriptsClient {
        crate::ScriptsClient::new(self.clone())
    }
}
