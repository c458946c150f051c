//! Users and their permissions (`/dbs/{db}/users/{user}/permissions/{p}`): durable catalog
//! records (`user/ | db | 0 | id`, `perm/ | db | 0 | user | 0 | id`), kept in memory by
//! database, with an index from a permission's `_rid` to where it lives, because every request
//! authorized by a resource token looks its permission up.
//!
//! A permission names its resource by link as the client wrote it (name- or rid-based, and it
//! need not exist yet: the service accepts a permission on any well-formed link); requests
//! resolve it when they are authorized.

use super::catalog::{self, db_rid_bytes};
use super::container::{read, write};
use super::engine::{Op, Space};
use super::{Store, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct UserRecord {
    pub id: String,
    pub seq: u32,
    pub ts: u64,
    pub etag_seq: u64,
}

/// What a permission grants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PermissionMode {
    Read,
    All,
}

impl PermissionMode {
    /// As the service spells it (and the SDKs' `PermissionMode` constants).
    pub fn as_str(self) -> &'static str {
        match self {
            PermissionMode::Read => "read",
            PermissionMode::All => "all",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PermissionRecord {
    pub id: String,
    pub mode: PermissionMode,
    /// The resource link as given (`dbs/db/colls/c`, rid-based, with or without slashes).
    pub resource: String,
    /// `resourcePartitionKey` as given: a full key, or (strata's extension) a prefix of a
    /// hierarchical key.
    #[serde(default)]
    pub partition_key: Option<Value>,
    pub seq: u64,
    pub ts: u64,
    pub etag_seq: u64,
}

/// A user and its permissions.
#[derive(Debug, Clone)]
pub struct UserEntry {
    pub user: UserRecord,
    pub permissions: BTreeMap<String, PermissionRecord>,
}

impl UserEntry {
    /// A permission of this user by id, or by `_rid` (rid-based links); `db_seq` is the
    /// database's sequence (rids are built from it).
    pub fn permission(&self, db_seq: u32, id: &str) -> Option<&PermissionRecord> {
        self.permissions.get(id).or_else(|| {
            self.permissions
                .values()
                .find(|p| permission_rid(db_seq, self.user.seq, p.seq) == id)
        })
    }
}

/// Users by database, and permissions by `_rid`.
#[derive(Debug, Default)]
pub struct Users {
    by_db: BTreeMap<String, BTreeMap<String, UserEntry>>,
    /// Permission `_rid` → (database id, user id, permission id).
    by_rid: HashMap<String, (String, String, String)>,
    next_user_seq: u32,
    next_perm_seq: u64,
}

pub fn user_rid_bytes(db_seq: u32, user_seq: u32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&db_rid_bytes(db_seq));
    b[4..].copy_from_slice(&(user_seq | 0x0100_0000).to_le_bytes());
    b
}

pub fn user_rid(db_seq: u32, user_seq: u32) -> String {
    catalog::rid(&user_rid_bytes(db_seq, user_seq))
}

pub fn permission_rid(db_seq: u32, user_seq: u32, seq: u64) -> String {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&user_rid_bytes(db_seq, user_seq));
    b[8..15].copy_from_slice(&seq.to_le_bytes()[..7]);
    b[15] = 0x90;
    catalog::rid(&b)
}

fn user_key(db: &str, id: &str) -> Vec<u8> {
    let mut k = b"user/".to_vec();
    k.extend_from_slice(db.as_bytes());
    k.push(0);
    k.extend_from_slice(id.as_bytes());
    k
}

fn perm_prefix(db: &str, user: &str) -> Vec<u8> {
    let mut k = b"perm/".to_vec();
    k.extend_from_slice(db.as_bytes());
    k.push(0);
    k.extend_from_slice(user.as_bytes());
    k.push(0);
    k
}

fn perm_key(db: &str, user: &str, id: &str) -> Vec<u8> {
    let mut k = perm_prefix(db, user);
    k.extend_from_slice(id.as_bytes());
    k
}

fn split_key(k: &[u8], prefix: &[u8]) -> Option<Vec<String>> {
    let rest = k.strip_prefix(prefix)?;
    Some(
        rest.split(|b| *b == 0)
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect(),
    )
}

/// Reads every stored user and permission.
pub fn load(
    engine: &super::Engine,
    db_seq_of: &dyn Fn(&str) -> Option<u32>,
) -> Result<Users, StoreError> {
    let mut users = Users::default();
    let corrupt = |e: serde_json::Error| StoreError::Corrupt(format!("user record: {e}"));
    for (k, v) in super::scan_prefix(engine, Space::Catalog, b"user/")? {
        let Some(parts) = split_key(&k, b"user/") else {
            continue;
        };
        let rec: UserRecord = serde_json::from_slice(&v).map_err(corrupt)?;
        users.next_user_seq = users.next_user_seq.max(rec.seq);
        users.by_db.entry(parts[0].clone()).or_default().insert(
            rec.id.clone(),
            UserEntry {
                user: rec,
                permissions: BTreeMap::new(),
            },
        );
    }
    for (k, v) in super::scan_prefix(engine, Space::Catalog, b"perm/")? {
        let Some(parts) = split_key(&k, b"perm/") else {
            continue;
        };
        if parts.len() < 3 {
            continue;
        }
        let rec: PermissionRecord = serde_json::from_slice(&v).map_err(corrupt)?;
        users.next_perm_seq = users.next_perm_seq.max(rec.seq);
        let (db, user) = (&parts[0], &parts[1]);
        let Some(entry) = users.by_db.get_mut(db).and_then(|m| m.get_mut(user)) else {
            continue;
        };
        if let Some(db_seq) = db_seq_of(db) {
            users.by_rid.insert(
                permission_rid(db_seq, entry.user.seq, rec.seq),
                (db.clone(), user.clone(), rec.id.clone()),
            );
        }
        entry.permissions.insert(rec.id.clone(), rec);
    }
    Ok(users)
}

/// How a write treats an existing resource of the same id (see the scripts' `PutMode`).
pub use super::scripts::PutMode;

impl Store {
    fn no_user(db: &str, id: &str) -> StoreError {
        StoreError::NotFound(format!(
            "Resource Not Found: the user '{id}' does not exist in database '{db}'."
        ))
    }

    /// The users of a database.
    pub fn list_users(&self, db: &str) -> Result<Vec<UserEntry>, StoreError> {
        let d = self.database(db)?;
        Ok(read(&self.inner.users)
            .by_db
            .get(&d.id)
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default())
    }

    /// One user (by id or `_rid`) with its permissions.
    pub fn user(&self, db: &str, id: &str) -> Result<UserEntry, StoreError> {
        let d = self.database(db)?;
        let users = read(&self.inner.users);
        let m = users.by_db.get(&d.id);
        m.and_then(|m| m.get(id))
            .or_else(|| m.and_then(|m| m.values().find(|u| user_rid(d.seq, u.user.seq) == id)))
            .cloned()
            .ok_or_else(|| Self::no_user(&d.id, id))
    }

    /// The permission a resource token names, by `_rid`: (database, user, permission).
    pub fn permission_by_rid(&self, rid: &str) -> Option<(String, UserRecord, PermissionRecord)> {
        let users = read(&self.inner.users);
        let (db, user, perm) = users.by_rid.get(rid)?;
        let entry = users.by_db.get(db)?.get(user)?;
        let p = entry.permissions.get(perm)?;
        Some((db.clone(), entry.user.clone(), p.clone()))
    }

    /// Creates, replaces (`target`, possibly renaming) or upserts a user.
    pub async fn put_user(
        &self,
        db: &str,
        id: &str,
        mode: PutMode,
        target: &str,
    ) -> Result<(UserRecord, bool), StoreError> {
        let _ddl = self.inner.ddl.lock().await;
        let d = self.database(db)?;
        let existing = self.user(&d.id, target).ok();
        match (mode, &existing) {
            (PutMode::Create, Some(_)) => {
                return Err(StoreError::Conflict(format!(
                    "Resource with specified id or name already exists: a user '{id}' already exists in database '{}'.",
                    d.id
                )))
            }
            (PutMode::Replace, None) => return Err(Self::no_user(&d.id, target)),
            _ => {}
        }
        let renamed = existing.as_ref().filter(|e| e.user.id != id);
        if renamed.is_some() && self.user(&d.id, id).is_ok() {
            return Err(StoreError::Conflict(format!(
                "Resource with specified id or name already exists: the user '{target}' cannot be renamed to '{id}', which already exists."
            )));
        }
        let (etag_seq, counter_op) = self.next_etag_seq();
        let seq = match &existing {
            Some(e) => e.user.seq,
            None => read(&self.inner.users).next_user_seq + 1,
        };
        let rec = UserRecord {
            id: id.to_string(),
            seq,
            ts: catalog::now_secs(),
            etag_seq,
        };
        let mut ops = vec![
            counter_op,
            Op::Put(
                Space::Catalog,
                user_key(&d.id, id),
                serde_json::to_vec(&rec).unwrap_or_default(),
            ),
        ];
        let perms = existing
            .as_ref()
            .map(|e| e.permissions.clone())
            .unwrap_or_default();
        if let Some(old) = renamed {
            // The permissions move with their user.
            ops.push(Op::Delete(Space::Catalog, user_key(&d.id, &old.user.id)));
            for p in perms.values() {
                ops.push(Op::Delete(
                    Space::Catalog,
                    perm_key(&d.id, &old.user.id, &p.id),
                ));
                ops.push(Op::Put(
                    Space::Catalog,
                    perm_key(&d.id, id, &p.id),
                    serde_json::to_vec(p).unwrap_or_default(),
                ));
            }
        }
        self.inner.engine.write_durable(ops).await?;
        let mut users = write(&self.inner.users);
        users.next_user_seq = users.next_user_seq.max(seq);
        let m = users.by_db.entry(d.id.clone()).or_default();
        if let Some(old) = renamed {
            m.remove(&old.user.id);
        }
        m.insert(
            id.to_string(),
            UserEntry {
                user: rec.clone(),
                permissions: perms.clone(),
            },
        );
        for p in perms.values() {
            users.by_rid.insert(
                permission_rid(d.seq, seq, p.seq),
                (d.id.clone(), id.to_string(), p.id.clone()),
            );
        }
        Ok((rec, existing.is_none()))
    }

    /// Deletes a user and its permissions (their tokens stop working).
    pub async fn delete_user(&self, db: &str, id: &str) -> Result<(), StoreError> {
        let _ddl = self.inner.ddl.lock().await;
        let d = self.database(db)?;
        let entry = self.user(&d.id, id)?;
        let mut ops = vec![Op::Delete(Space::Catalog, user_key(&d.id, &entry.user.id))];
        for p in entry.permissions.values() {
            ops.push(Op::Delete(
                Space::Catalog,
                perm_key(&d.id, &entry.user.id, &p.id),
            ));
        }
        self.inner.engine.write_durable(ops).await?;
        let mut users = write(&self.inner.users);
        if let Some(m) = users.by_db.get_mut(&d.id) {
            m.remove(&entry.user.id);
        }
        for p in entry.permissions.values() {
            users
                .by_rid
                .remove(&permission_rid(d.seq, entry.user.seq, p.seq));
        }
        Ok(())
    }

    /// Creates, replaces (`target`, possibly renaming) or upserts a permission.
    pub async fn put_permission(
        &self,
        db: &str,
        user: &str,
        mut new: PermissionRecord,
        mode: PutMode,
        target: &str,
    ) -> Result<(PermissionRecord, bool), StoreError> {
        let _ddl = self.inner.ddl.lock().await;
        let d = self.database(db)?;
        let entry = self.user(&d.id, user)?;
        let existing = entry.permission(d.seq, target).cloned();
        match (mode, &existing) {
            (PutMode::Create, Some(_)) => {
                return Err(StoreError::Conflict(format!(
                    "Resource with specified id or name already exists: a permission '{}' already exists for user '{}'.",
                    new.id, entry.user.id
                )))
            }
            (PutMode::Replace, None) => {
                return Err(StoreError::NotFound(format!(
                    "Resource Not Found: the permission '{target}' does not exist for user '{}'.",
                    entry.user.id
                )))
            }
            _ => {}
        }
        let renamed = existing.as_ref().filter(|e| e.id != new.id);
        if renamed.is_some() && entry.permissions.contains_key(&new.id) {
            return Err(StoreError::Conflict(format!(
                "Resource with specified id or name already exists: the permission '{target}' cannot be renamed to '{}', which already exists.",
                new.id
            )));
        }
        // A resource token is bound to the permission's rid and etag, so replacing a
        // permission (a new etag) retires the tokens issued for the old grant.
        let (etag_seq, counter_op) = self.next_etag_seq();
        new.seq = match &existing {
            Some(e) => e.seq,
            None => read(&self.inner.users).next_perm_seq + 1,
        };
        new.ts = catalog::now_secs();
        new.etag_seq = etag_seq;
        let mut ops = vec![
            counter_op,
            Op::Put(
                Space::Catalog,
                perm_key(&d.id, &entry.user.id, &new.id),
                serde_json::to_vec(&new).unwrap_or_default(),
            ),
        ];
        if let Some(old) = renamed {
            ops.push(Op::Delete(
                Space::Catalog,
                perm_key(&d.id, &entry.user.id, &old.id),
            ));
        }
        self.inner.engine.write_durable(ops).await?;
        let mut users = write(&self.inner.users);
        users.next_perm_seq = users.next_perm_seq.max(new.seq);
        if let Some(e) = users
            .by_db
            .get_mut(&d.id)
            .and_then(|m| m.get_mut(&entry.user.id))
        {
            if let Some(old) = renamed {
                e.permissions.remove(&old.id);
            }
            e.permissions.insert(new.id.clone(), new.clone());
        }
        users.by_rid.insert(
            permission_rid(d.seq, entry.user.seq, new.seq),
            (d.id.clone(), entry.user.id.clone(), new.id.clone()),
        );
        Ok((new, existing.is_none()))
    }

    /// Deletes a permission (its tokens stop working).
    pub async fn delete_permission(
        &self,
        db: &str,
        user: &str,
        id: &str,
    ) -> Result<(), StoreError> {
        let _ddl = self.inner.ddl.lock().await;
        let d = self.database(db)?;
        let entry = self.user(&d.id, user)?;
        let p = entry.permission(d.seq, id).cloned().ok_or_else(|| {
            StoreError::NotFound(format!(
                "Resource Not Found: the permission '{id}' does not exist for user '{}'.",
                entry.user.id
            ))
        })?;
        self.inner
            .engine
            .write_durable(vec![Op::Delete(
                Space::Catalog,
                perm_key(&d.id, &entry.user.id, &p.id),
            )])
            .await?;
        let mut users = write(&self.inner.users);
        if let Some(e) = users
            .by_db
            .get_mut(&d.id)
            .and_then(|m| m.get_mut(&entry.user.id))
        {
            e.permissions.remove(&p.id);
        }
        users
            .by_rid
            .remove(&permission_rid(d.seq, entry.user.seq, p.seq));
        Ok(())
    }

    /// The catalog operations that remove a database's users and permissions.
    pub(super) fn users_delete_ops(&self, db: &str) -> Vec<Op> {
        let users = read(&self.inner.users);
        let mut ops = Vec::new();
        for e in users.by_db.get(db).into_iter().flat_map(|m| m.values()) {
            ops.push(Op::Delete(Space::Catalog, user_key(db, &e.user.id)));
            for p in e.permissions.values() {
                ops.push(Op::Delete(Space::Catalog, perm_key(db, &e.user.id, &p.id)));
            }
        }
        ops
    }

    /// Forgets a deleted database's users and permissions.
    pub(super) fn forget_users(&self, db: &str, db_seq: u32) {
        let mut users = write(&self.inner.users);
        let Some(m) = users.by_db.remove(db) else {
            return;
        };
        for e in m.values() {
            for p in e.permissions.values() {
                users
                    .by_rid
                    .remove(&permission_rid(db_seq, e.user.seq, p.seq));
            }
        }
    }
}
