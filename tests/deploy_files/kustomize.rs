//! `kubectl kustomize`, the part deploy/kubernetes uses, so that each overlay is tested as
//! the cluster receives it: `resources` (files, or directories with a kustomization of their
//! own), `images` (a new tag or name for an image, whatever its tag), and `patches` that name a
//! file, merged the strategic way: maps key by key, and the lists Kubernetes merges by `name`
//! (containers, volumes, mounts, environment variables, ports) item by item; any other list is
//! replaced. No kustomize binary can be installed here from the registries this project uses.

use std::path::Path;

use yaml_rust2::Yaml;

use super::{list, str_of, yaml_documents};

/// The objects `kubectl kustomize DIR` would print.
pub fn build(dir: &Path) -> Vec<Yaml> {
    let kustomization = &yaml_documents(&dir.join("kustomization.yaml"))[0];
    let mut objects = Vec::new();
    for resource in list(&kustomization["resources"], "resources") {
        let path = dir.join(str_of(resource, "resource"));
        if path.is_dir() {
            objects.extend(build(&path));
        } else {
            objects.extend(yaml_documents(&path));
        }
    }
    if let Some(patches) = kustomization["patches"].as_vec() {
        for patch in patches {
            let file = dir.join(str_of(&patch["path"], "a patch's path"));
            for patch in yaml_documents(&file) {
                let target = objects
                    .iter_mut()
                    .find(|o| {
                        o["kind"] == patch["kind"]
                            && o["metadata"]["name"] == patch["metadata"]["name"]
                    })
                    .unwrap_or_else(|| {
                        panic!("{}: patches no object of the build", file.display())
                    });
                merge(target, &patch);
            }
        }
    }
    if let Some(images) = kustomization["images"].as_vec() {
        for image in images {
            let name = str_of(&image["name"], "an image's name");
            for object in &mut objects {
                retag(object, name, image);
            }
        }
    }
    objects
}

/// A strategic merge of `patch` into `target`.
fn merge(target: &mut Yaml, patch: &Yaml) {
    match (target, patch) {
        (Yaml::Hash(target), Yaml::Hash(patch)) => {
            for (key, value) in patch {
                match target.get_mut(key) {
                    Some(existing) => merge(existing, value),
                    None => {
                        target.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (Yaml::Array(target), Yaml::Array(patch))
            if patch.iter().all(|p| !p["name"].is_badvalue()) =>
        {
            for item in patch {
                match target.iter_mut().find(|t| t["name"] == item["name"]) {
                    Some(existing) => merge(existing, item),
                    None => target.push(item.clone()),
                }
            }
        }
        (target, patch) => *target = patch.clone(),
    }
}

/// Every `image:` naming `name` (with any tag) takes the entry's `newName` and `newTag`.
fn retag(node: &mut Yaml, name: &str, entry: &Yaml) {
    match node {
        Yaml::Hash(hash) => {
            for (key, value) in hash.iter_mut() {
                let current = value.as_str().map(str::to_string);
                match (key.as_str(), current) {
                    (Some("image"), Some(image)) if image.split(':').next() == Some(name) => {
                        let (old_name, old_tag) =
                            image.split_once(':').unwrap_or((&image, "latest"));
                        let new_name = entry["newName"].as_str().unwrap_or(old_name);
                        let new_tag = entry["newTag"].as_str().unwrap_or(old_tag);
                        *value = Yaml::String(format!("{new_name}:{new_tag}"));
                    }
                    _ => retag(value, name, entry),
                }
            }
        }
        Yaml::Array(items) => items.iter_mut().for_each(|item| retag(item, name, entry)),
        _ => {}
    }
}

#[test]
fn a_strategic_merge_keys_lists_by_name_and_replaces_the_rest() {
    let load = |text: &str| {
        yaml_rust2::YamlLoader::load_from_str(text)
            .unwrap()
            .remove(0)
    };
    let mut target =
        load("containers: [{name: a, image: 'x:1', env: [{name: A, value: '1'}]}]\nargs: [p, q]");
    merge(
        &mut target,
        &load("containers: [{name: a, env: [{name: B, value: '2'}]}, {name: b}]\nargs: [r]"),
    );
    let containers = list(&target["containers"], "containers");
    assert_eq!(containers.len(), 2);
    assert_eq!(str_of(&containers[0]["image"], "image"), "x:1");
    assert_eq!(list(&containers[0]["env"], "env").len(), 2);
    assert_eq!(list(&target["args"], "args").len(), 1);
    retag(&mut target, "x", &load("{name: x, newTag: '2'}"));
    assert_eq!(
        str_of(&list(&target["containers"], "c")[0]["image"], "image"),
        "x:2"
    );
}
