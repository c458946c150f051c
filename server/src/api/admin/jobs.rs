//! `/_strata/jobs`: start, watch and stop server-side copy jobs (see
//! [`crate::transfer::jobs`]). `POST` with `{"source": "DB/C", "dest": "DB/C",
//! "partitionKey": ["/a", "/b", "/c"], "fill": ["/c=/id"], "follow": false}` (and `from` /
//! `to` connection strings for other accounts) answers 201 with the job; `GET` lists jobs or
//! shows one with its progress (phase, items, bytes, rate, ETA, lag); `DELETE` stops and
//! forgets one.

use crate::api::request::Req;
use crate::api::response::Reply;
use crate::api::App;
use crate::error::CosmosError;
use crate::transfer::jobs::JobError;
use axum::http::StatusCode;
use serde_json::json;

impl From<JobError> for CosmosError {
    fn from(e: JobError) -> Self {
        match e {
            JobError::BadRequest(m) => CosmosError::bad_request(m),
            JobError::NotFound(m) => CosmosError::not_found(m),
            JobError::Conflict(m) => CosmosError::conflict(m),
            JobError::Internal(m) => CosmosError::internal(m),
        }
    }
}

pub fn list(app: &App) -> Result<Reply, CosmosError> {
    let jobs = app.jobs.list();
    Ok(Reply::json(
        StatusCode::OK,
        &json!({"Jobs": jobs, "_count": jobs.len()}),
    ))
}

pub fn create(app: &App, req: &Req) -> Result<Reply, CosmosError> {
    let job = app.jobs.create(req.json_object()?)?;
    Ok(Reply::json(StatusCode::CREATED, &job))
}

pub fn read(app: &App, id: &str) -> Result<Reply, CosmosError> {
    Ok(Reply::json(StatusCode::OK, &app.jobs.get(id)?))
}

pub fn delete(app: &App, id: &str) -> Result<Reply, CosmosError> {
    app.jobs.delete(id)?;
    Ok(Reply::empty(StatusCode::NO_CONTENT))
}
