use super::*;

fn clip(seconds: f64, level: f32) -> Clip {
    let rate = 16_000;
    Clip {
        samples: vec![level; (seconds * f64::from(rate)) as usize],
        sample_rate: rate,
    }
}

fn store() -> (tempfile::TempDir, ProfileStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = ProfileStore::open(dir.path().join("profiles")).unwrap();
    (dir, store)
}

fn staging_entries(store: &ProfileStore) -> Vec<String> {
    match fs::read_dir(store.dir().join(STAGING)) {
        Ok(entries) => entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn create_get_update_delete() {
    let (_dir, store) = store();
    assert!(
        store.list().unwrap().is_empty(),
        "a missing directory lists nothing"
    );
    assert!(!store.dir().exists(), "opening makes no directory");

    let made = store
        .create("anna", None, Some("Hello there.".into()), &clip(1.0, 0.25))
        .unwrap();
    assert_eq!(
        made.name, "anna",
        "the name defaults to the id, as in Python"
    );
    assert!(made.created_at.as_deref().unwrap().ends_with("+00:00"));
    assert!(matches!(
        store.create("anna", None, None, &clip(1.0, 0.1)),
        Err(ProfileError::Exists(_))
    ));

    let got = store.get("anna").unwrap();
    assert_eq!(got.meta, made);
    assert_eq!(
        store.meta("anna").unwrap(),
        made,
        "the same, without the clip"
    );
    assert_eq!(got.audio_sha256, sha256_hex(&got.audio));
    let decoded = crate::audio::upload::decode_upload(&got.audio).unwrap();
    assert_eq!(decoded.samples.len(), 16_000);

    let renamed = store
        .update(
            "anna",
            ProfileChange {
                name: Some("Anna K.".into()),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(renamed.ref_text.as_deref(), Some("Hello there."), "kept");
    assert_eq!(renamed.created_at, made.created_at, "kept");
    assert_eq!(store.get("anna").unwrap().audio, got.audio, "kept");

    let reclipped = store
        .update(
            "anna",
            ProfileChange {
                clip: Some(clip(2.0, 0.5)),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(
        reclipped.ref_text, None,
        "the old clip's transcript goes with it"
    );
    assert_eq!(reclipped.name, "Anna K.");
    let again = store.get("anna").unwrap();
    assert_ne!(again.audio_sha256, got.audio_sha256);

    assert_eq!(store.list().unwrap(), vec![reclipped]);
    store.delete("anna").unwrap();
    assert!(matches!(store.get("anna"), Err(ProfileError::NotFound(_))));
    assert!(matches!(store.meta("anna"), Err(ProfileError::NotFound(_))));
    assert!(matches!(
        store.delete("anna"),
        Err(ProfileError::NotFound(_))
    ));
    assert!(matches!(
        store.update("anna", ProfileChange::default()),
        Err(ProfileError::NotFound(_))
    ));
    assert!(store.list().unwrap().is_empty());
    assert!(
        staging_entries(&store).is_empty(),
        "{:?}",
        staging_entries(&store)
    );
}

#[test]
fn replace_makes_a_new_profile_either_way() {
    let (_dir, store) = store();
    store
        .replace("b", Some("Bee".into()), Some("one".into()), &clip(1.0, 0.1))
        .unwrap();
    let first = store.get("b").unwrap();
    let second = store.replace("b", None, None, &clip(1.5, 0.2)).unwrap();
    assert_eq!(second.name, "b");
    assert_eq!(second.ref_text, None);
    assert_ne!(store.get("b").unwrap().audio, first.audio);
}

#[test]
fn ids_are_checked_before_any_file_is_touched() {
    let (_dir, store) = store();
    for bad in ["", "../x", "a/b", ".staging", "a b", "é", &"x".repeat(65)] {
        assert!(
            matches!(store.get(bad), Err(ProfileError::InvalidId(_))),
            "{bad:?}"
        );
        assert!(matches!(
            store.create(bad, None, None, &clip(1.0, 0.1)),
            Err(ProfileError::InvalidId(_))
        ));
        assert!(matches!(store.delete(bad), Err(ProfileError::InvalidId(_))));
        assert!(matches!(store.meta(bad), Err(ProfileError::InvalidId(_))));
    }
    store
        .create(&"x".repeat(64), None, None, &clip(1.0, 0.1))
        .unwrap();
    assert!(!store.dir().join("..").join("x").exists());
}

#[test]
fn codes_are_keyed_by_clip_and_codec_and_go_with_the_profile() {
    let (_dir, store) = store();
    store.create("c", None, None, &clip(1.0, 0.1)).unwrap();
    let sha = store.get("c").unwrap().audio_sha256;
    assert_eq!(store.codes("c", &sha, "mimi-v1"), None);
    store
        .store_codes("c", &sha, "mimi-v1", b"codes one")
        .unwrap();
    assert_eq!(
        store.codes("c", &sha, "mimi-v1").as_deref(),
        Some(&b"codes one"[..])
    );
    assert_eq!(store.codes("c", &sha, "mimi-v2"), None, "another codec");
    assert!(matches!(
        store.store_codes("c", &sha, "../evil", b"x"),
        Err(ProfileError::InvalidFingerprint(_))
    ));
    assert_eq!(store.codes("c", "../../etc/passwd", "mimi-v1"), None);

    // A name change keeps the clip, and so its codes.
    store
        .update(
            "c",
            ProfileChange {
                name: Some("C".into()),
                ..Default::default()
            },
        )
        .unwrap();
    assert!(store.codes("c", &sha, "mimi-v1").is_some());

    // A new clip: the old codes are gone, and codes of the old clip are not stored any more.
    store
        .update(
            "c",
            ProfileChange {
                clip: Some(clip(1.0, 0.3)),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(store.codes("c", &sha, "mimi-v1"), None);
    store.store_codes("c", &sha, "mimi-v1", b"stale").unwrap();
    assert_eq!(store.codes("c", &sha, "mimi-v1"), None);
    let files: Vec<_> = fs::read_dir(store.dir().join("c"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(files.len(), 2, "{files:?}");

    store.delete("c").unwrap();
    assert!(matches!(
        store.store_codes("c", &sha, "mimi-v1", b"x"),
        Err(ProfileError::NotFound(_))
    ));
}

/// The states a crash can leave, made by hand: each is repaired at the next open, and no
/// listing ever shows a half profile.
#[test]
fn a_crash_at_any_step_leaves_one_whole_version() {
    let (_dir, store) = store();
    store
        .create("old", None, Some("old text".into()), &clip(1.0, 0.1))
        .unwrap();
    let before = store.get("old").unwrap();
    let staging = store.dir().join(STAGING);
    let new_audio = encode_clip(&clip(2.0, 0.2));
    let new_meta = meta_json(&new_meta(None, Some("new text".into())));
    fs::create_dir_all(&staging).unwrap();

    // 1. A new profile built half-way, never renamed into place.
    let half = staging.join("new-1234");
    fs::create_dir(&half).unwrap();
    fs::write(half.join(AUDIO_FILE), &new_audio).unwrap();
    // 2. A change built but not committed.
    let uncommitted = staging.join("build-5678");
    fs::create_dir(&uncommitted).unwrap();
    fs::write(uncommitted.join(AUDIO_FILE), &new_audio).unwrap();
    // 3. A temporary codes file.
    fs::write(staging.join("file-9"), b"partial").unwrap();
    assert_eq!(store.list().unwrap().len(), 1, "leftovers are never listed");

    let reopened = ProfileStore::open(store.dir()).unwrap();
    assert!(staging_entries(&reopened).is_empty());
    let after = reopened.get("old").unwrap();
    assert_eq!(
        after.audio, before.audio,
        "an uncommitted change is dropped"
    );
    assert_eq!(after.meta, before.meta);

    // 4. A committed change whose clip was moved into place, and the crash came before the
    //    metadata followed: the next open finishes it.
    store
        .store_codes("old", &before.audio_sha256, "codec", b"old codes")
        .unwrap();
    let commit = staging.join(format!("{COMMIT}old"));
    fs::create_dir_all(&commit).unwrap();
    fs::write(commit.join(META_FILE), &new_meta).unwrap();
    fs::write(store.dir().join("old").join(AUDIO_FILE), &new_audio).unwrap();
    let reopened = ProfileStore::open(store.dir()).unwrap();
    let finished = reopened.get("old").unwrap();
    assert_eq!(finished.audio, new_audio);
    assert_eq!(finished.meta.ref_text.as_deref(), Some("new text"));
    assert_eq!(
        reopened.codes("old", &before.audio_sha256, "codec"),
        None,
        "the old clip's codes are dropped"
    );
    assert!(staging_entries(&reopened).is_empty());

    // 5. A committed change with nothing moved yet.
    fs::create_dir_all(&commit).unwrap();
    fs::write(commit.join(AUDIO_FILE), encode_clip(&clip(3.0, 0.3))).unwrap();
    fs::write(
        commit.join(META_FILE),
        meta_json(&new_meta_with_text("third")),
    )
    .unwrap();
    let reopened = ProfileStore::open(store.dir()).unwrap();
    let third = reopened.get("old").unwrap();
    assert_eq!(third.meta.ref_text.as_deref(), Some("third"));
    assert_eq!(
        crate::audio::upload::decode_upload(&third.audio)
            .unwrap()
            .samples
            .len(),
        48_000
    );

    // 6. A deletion renamed out of the listing but not yet removed.
    fs::rename(store.dir().join("old"), staging.join("trash-1")).unwrap();
    let reopened = ProfileStore::open(store.dir()).unwrap();
    assert!(reopened.list().unwrap().is_empty());
    assert!(staging_entries(&reopened).is_empty());
}

fn new_meta_with_text(text: &str) -> MetaFile {
    new_meta(None, Some(text.into()))
}

#[test]
fn unknown_keys_survive_a_rewrite_and_python_files_read_as_written() {
    let (_dir, store) = store();
    let live = store.dir().join("py");
    fs::create_dir_all(&live).unwrap();
    fs::write(live.join(AUDIO_FILE), b"ID3 whatever an mp3 is").unwrap();
    fs::write(
        live.join(META_FILE),
        "{\n  \"name\": \"py\",\n  \"ref_text\": null,\n  \"created_at\": \"2026-01-02T03:04:05.000006+00:00\",\n  \"future\": [1, 2]\n}",
    )
    .unwrap();
    let got = store.get("py").unwrap();
    assert_eq!(got.audio, b"ID3 whatever an mp3 is", "the file as it is");
    assert_eq!(got.meta.ref_text, None);
    store
        .update(
            "py",
            ProfileChange {
                ref_text: Some("hi".into()),
                ..Default::default()
            },
        )
        .unwrap();
    let text = fs::read_to_string(live.join(META_FILE)).unwrap();
    assert_eq!(
        text,
        "{\n  \"name\": \"py\",\n  \"ref_text\": \"hi\",\n  \"created_at\": \"2026-01-02T03:04:05.000006+00:00\",\n  \"future\": [\n    1,\n    2\n  ]\n}"
    );

    // Metadata nobody can parse, or a missing clip: not a profile (as in Python's listing).
    fs::create_dir_all(store.dir().join("broken")).unwrap();
    fs::write(store.dir().join("broken").join(META_FILE), "{not json").unwrap();
    fs::write(store.dir().join("broken").join(AUDIO_FILE), b"x").unwrap();
    fs::create_dir_all(store.dir().join("noclip")).unwrap();
    fs::write(store.dir().join("noclip").join(META_FILE), "{}").unwrap();
    let ids: Vec<_> = store.list().unwrap().into_iter().map(|m| m.id).collect();
    assert_eq!(ids, ["py"]);
    assert!(matches!(
        store.get("broken"),
        Err(ProfileError::NotFound(_))
    ));
    assert!(matches!(
        store.create("broken", None, None, &clip(1.0, 0.1)),
        Err(ProfileError::Exists(_))
    ));
    store.delete("broken").unwrap();
}

#[test]
fn concurrent_updates_leave_one_of_them_whole() {
    let (_dir, store) = store();
    store.create("p", None, None, &clip(1.0, 0.1)).unwrap();
    let store = std::sync::Arc::new(store);
    let writers: Vec<_> = (1..=6)
        .map(|i| {
            let store = store.clone();
            std::thread::spawn(move || {
                store
                    .update(
                        "p",
                        ProfileChange {
                            name: Some(format!("n{i}")),
                            ref_text: Some(format!("t{i}")),
                            clip: Some(clip(1.0 + i as f64 * 0.25, 0.1)),
                        },
                    )
                    .unwrap();
            })
        })
        .collect();
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let store = store.clone();
            std::thread::spawn(move || {
                for _ in 0..50 {
                    let p = store.get("p").unwrap();
                    let Some(i) = p.meta.name.strip_prefix('n') else {
                        continue; // the original
                    };
                    let i: f64 = i.parse().unwrap();
                    assert_eq!(p.meta.ref_text, Some(format!("t{i}")));
                    let n = crate::audio::upload::decode_upload(&p.audio)
                        .unwrap()
                        .samples
                        .len();
                    assert_eq!(n, ((1.0 + i * 0.25) * 16_000.0) as usize, "{}", p.meta.name);
                }
            })
        })
        .collect();
    for t in writers.into_iter().chain(readers) {
        t.join().unwrap();
    }
    assert!(staging_entries(&store).is_empty());
}
