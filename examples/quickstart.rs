use snapshot_engine::{
    CommitOptions, Engine, EngineConfig, OwnedSession, TableOptions, TimestampUpdate, TxnOptions,
};
use std::sync::Arc;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let engine = Arc::new(Engine::new(EngineConfig::default())?);
    let prices = engine.create_table("prices", TableOptions::default())?;

    // A transaction: writes to the default table and to `prices`, then `?`
    // on commit (its error owns nothing); all of them commit, or none.
    let mut session = engine.session()?;
    let mut txn = session.begin(&TxnOptions::default())?;
    txn.put("apple", "red")?;
    txn.put("pear", "green")?;
    txn.table(&prices)?.put("apple", "3")?;
    txn.commit(CommitOptions::at(10))?; // the session is free again
    engine.set_timestamps(TimestampUpdate::stable(10).and_oldest(5))?;

    // An owned session: Send + 'static, for a struct, a pool, or a thread.
    let mut owned: OwnedSession = engine.owned_session()?;
    let worker = std::thread::spawn(move || -> snapshot_engine::Result<()> {
        let mut txn = owned.begin(&TxnOptions::default())?;
        txn.put("plum", "purple")?;
        txn.commit(CommitOptions::at(20))
    });
    worker.join().map_err(|_| "the worker panicked")??;

    // Read at timestamp 15: the commit at 10 is there, the one at 20 is not.
    let mut txn = session.begin(&TxnOptions::at(15))?;
    for row in txn.iter("a".."q").rev() {
        let (key, value) = row?;
        println!(
            "{} = {}",
            String::from_utf8_lossy(key),
            String::from_utf8_lossy(&value)
        );
    }
    assert_eq!(txn.get("plum")?, None);
    assert_eq!(
        txn.table(&prices)?.get("apple")?.as_deref(),
        Some(&b"3"[..])
    );
    Ok(())
}
