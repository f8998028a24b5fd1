//! Kokoro's voices: voice packs, one 256-value style vector per input length, read from the
//! three layouts they are distributed in, and what a voice id says about its voice.
//!
//! A Kokoro directory holds its packs as `voices/<id>.bin` (kokoro-js: raw little-endian f32,
//! 510 × 1 × 256), `voices/<id>.npy` (numpy, the same array), or in one archive beside the
//! model (`voices-v1.0.bin` of kokoro-onnx, or any `*.npz`: a zip of `<id>.npy` members).
//! Voices are found by scanning, so a client's voice name is only ever looked up in that list,
//! never joined into a path. A file that is not a pack (truncated, wrong shape or type,
//! non-finite values) is an error that names it, when the voice is loaded.
//!
//! The style vector of an input is the row of its length in tokens less one, pads not
//! counted, `pack[min(tokens, 510) − 1]`: the choice of kokoro-onnx 0.6.1 (older versions took
//! `voice[len(tokens)]`) and of hexgrad's pipeline (`pack[len(phonemes) − 1]`, Kokoro-FastAPI
//! with it). The oracle fixtures were made that way: "Hello world. This is a test." has 30
//! tokens and is spoken in row 29 (`crates/models/tests/fixtures/kokoro/README.md`).

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::language::Language;

/// Rows of a pack: one per input length 1..=510 tokens.
pub const ROWS: usize = 510;
/// Values of one style vector: 128 for the decoder, 128 for the prosody predictor.
pub const STYLE_DIM: usize = 256;
const VALUES: usize = ROWS * STYLE_DIM;
/// Bytes of a kokoro-js `.bin` pack.
const RAW_BYTES: u64 = (VALUES * 4) as u64;
/// Anything larger is no pack, whatever its header claims: the header stays unread. (Room for
/// a float64 array of a pack's shape, so that one is refused for its type, which says more.)
const MAX_NPY_BYTES: u64 = 2 * RAW_BYTES + 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Gender {
    Female,
    Male,
}

impl Gender {
    /// How `/v1/audio/voices` names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Female => "female",
            Self::Male => "male",
        }
    }
}

/// What a voice id (`af_heart`: American English, female, "heart") says about its voice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VoiceTraits {
    pub language: Language,
    pub gender: Gender,
}

impl VoiceTraits {
    /// The traits of a well-formed id: a language letter, `f` or `m`, `_`, then a name of
    /// ASCII letters, digits and `_` (nothing the blend syntax `a(1)+b-c` could misread).
    pub fn of(id: &str) -> Option<Self> {
        let mut chars = id.chars();
        let language = Language::from_code(chars.next()?)?;
        let gender = match chars.next()? {
            'f' => Gender::Female,
            'm' => Gender::Male,
            _ => return None,
        };
        let name = chars.as_str().strip_prefix('_')?;
        let well_formed =
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        well_formed.then_some(Self { language, gender })
    }
}

/// A voice pack: [`ROWS`] style vectors of [`STYLE_DIM`] values. Cheap to clone.
#[derive(Clone, PartialEq)]
pub struct Pack {
    values: Arc<[f32]>,
}

impl std::fmt::Debug for Pack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Pack([{ROWS}, {STYLE_DIM}], row 0 starts {:?})",
            &self.values[..4]
        )
    }
}

impl Pack {
    /// A pack from its values, row after row; `None` unless there are [`ROWS`] × [`STYLE_DIM`]
    /// of them, all finite.
    pub fn from_values(values: Vec<f32>) -> Option<Self> {
        (values.len() == VALUES && values.iter().all(|v| v.is_finite())).then(|| Self {
            values: values.into(),
        })
    }

    /// A pack computed from packs (a blend): as many values, and finite, by construction.
    pub(super) fn from_mix(values: Vec<f32>) -> Self {
        debug_assert_eq!(values.len(), VALUES);
        Self {
            values: values.into(),
        }
    }

    /// The style vector for an input of `tokens` tokens (pads not counted): row
    /// `min(tokens, 510) − 1` (row 0 for no tokens).
    pub fn style(&self, tokens: usize) -> &[f32] {
        let row = tokens.clamp(1, ROWS) - 1;
        &self.values[row * STYLE_DIM..(row + 1) * STYLE_DIM]
    }

    /// All values, row after row.
    pub fn values(&self) -> &[f32] {
        &self.values
    }
}

/// Why a pack could not be read. The message names the file (and the archive member).
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {reason}", path.display())]
    Invalid { path: PathBuf, reason: String },
    #[error("{}: voice pack {member}: {reason}", path.display())]
    Member {
        path: PathBuf,
        member: String,
        reason: String,
    },
}

/// Where a pack lies.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Location {
    /// kokoro-js's raw f32.
    Raw(PathBuf),
    Npy(PathBuf),
    /// A member `<id>.npy` of a zip archive (kokoro-onnx's `voices-v1.0.bin`, any `.npz`).
    Archive(PathBuf),
}

/// A pack found by a scan, not read yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackFile {
    pub id: String,
    pub traits: VoiceTraits,
    location: Location,
}

impl PackFile {
    /// The file the pack is in (the archive, for a member of one).
    pub fn path(&self) -> &Path {
        match &self.location {
            Location::Raw(p) | Location::Npy(p) | Location::Archive(p) => p,
        }
    }

    pub fn load(&self) -> Result<Pack, PackError> {
        match &self.location {
            Location::Raw(path) => read_raw(path),
            Location::Npy(path) => read_npy(path),
            Location::Archive(path) => read_member(path, &self.id),
        }
    }
}

/// The packs of a Kokoro directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PackDir {
    packs: BTreeMap<String, PackFile>,
}

impl PackDir {
    /// Finds every pack of `dir`: `voices/*.bin`, `voices/*.npy`, and the members of the
    /// archives `dir/*.npz` and `dir/voices*.bin`. An id found twice is taken from the first
    /// place in that order (a single file overrides an archive; archives in name order). Ids
    /// that name no voice ([`VoiceTraits::of`]) and archives that cannot be listed are skipped
    /// with a warning: one bad file never hides the other voices.
    pub fn scan(dir: &Path) -> Self {
        let mut packs = BTreeMap::new();
        let mut found = |id: &str, location: Location| {
            let Some(traits) = VoiceTraits::of(id) else {
                tracing::warn!(file = %location_path(&location).display(), id, "not a Kokoro voice id (like af_heart); skipped");
                return;
            };
            packs.entry(id.to_string()).or_insert_with(|| PackFile {
                id: id.to_string(),
                traits,
                location,
            });
        };
        for (path, stem, extension) in sorted_files(&dir.join("voices")) {
            match extension.as_str() {
                "bin" => found(&stem, Location::Raw(path)),
                "npy" => found(&stem, Location::Npy(path)),
                _ => {}
            }
        }
        for (path, stem, extension) in sorted_files(dir) {
            let archive = extension == "npz" || (extension == "bin" && stem.starts_with("voices"));
            if !archive {
                continue;
            }
            match archive_members(&path) {
                Ok(members) => {
                    for member in members {
                        found(&member, Location::Archive(path.clone()));
                    }
                }
                Err(e) => tracing::warn!(error = %e, "voice archive cannot be listed; skipped"),
            }
        }
        Self { packs }
    }

    pub fn get(&self, id: &str) -> Option<&PackFile> {
        self.packs.get(id)
    }

    /// Every pack, by id.
    pub fn iter(&self) -> impl Iterator<Item = &PackFile> {
        self.packs.values()
    }

    pub fn len(&self) -> usize {
        self.packs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.packs.is_empty()
    }
}

fn location_path(location: &Location) -> &Path {
    match location {
        Location::Raw(p) | Location::Npy(p) | Location::Archive(p) => p,
    }
}

/// The regular files of `dir` with their stems and lowercase extensions, by name.
fn sorted_files(dir: &Path) -> Vec<(PathBuf, String, String)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<(PathBuf, String, String)> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .filter_map(|p| {
            let stem = p.file_stem()?.to_str()?.to_string();
            let extension = p.extension()?.to_str()?.to_ascii_lowercase();
            Some((p, stem, extension))
        })
        .collect();
    files.sort();
    files
}

fn io_error(path: &Path) -> impl FnOnce(std::io::Error) -> PackError + '_ {
    move |source| PackError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn invalid(path: &Path, reason: impl Into<String>) -> PackError {
    PackError::Invalid {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

fn finite_pack(path: &Path, values: Vec<f32>) -> Result<Pack, PackError> {
    match values.iter().position(|v| !v.is_finite()) {
        Some(at) => Err(invalid(
            path,
            format!("value {at} of the pack is {}", values[at]),
        )),
        None => Pack::from_values(values).ok_or_else(|| invalid(path, "not 510 × 256 values")),
    }
}

fn read_raw(path: &Path) -> Result<Pack, PackError> {
    let size = std::fs::metadata(path).map_err(io_error(path))?.len();
    if size != RAW_BYTES {
        return Err(invalid(
            path,
            format!(
                "{size} bytes, not {RAW_BYTES} (a pack is 510 × 1 × 256 little-endian f32){}",
                if size < RAW_BYTES { ": truncated?" } else { "" }
            ),
        ));
    }
    let bytes = std::fs::read(path).map_err(io_error(path))?;
    finite_pack(path, f32_values(&bytes))
}

fn f32_values(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// The array description of a `.npy` header.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NpyHeader {
    descr: String,
    fortran_order: bool,
    shape: Vec<usize>,
    /// Bytes before the data.
    data_offset: usize,
}

/// Parses the header of a `.npy` file (format versions 1 to 3): magic, version, header
/// length, then a Python dict literal with `descr`, `fortran_order` and `shape`.
fn npy_header(bytes: &[u8]) -> Result<NpyHeader, String> {
    let rest = bytes
        .strip_prefix(b"\x93NUMPY")
        .ok_or("not a .npy file (no \\x93NUMPY magic)")?;
    let (length, start) = match rest {
        [1, _, a, b, ..] => (u16::from_le_bytes([*a, *b]) as usize, 10),
        [2 | 3, _, a, b, c, d, ..] => (u32::from_le_bytes([*a, *b, *c, *d]) as usize, 12),
        [major, ..] => return Err(format!("unknown .npy format version {major}")),
        [] => return Err("truncated .npy header".into()),
    };
    let text = bytes
        .get(start..start + length)
        .ok_or("truncated .npy header")?;
    let text = std::str::from_utf8(text).map_err(|_| "the .npy header is not text")?;
    let value = |key: &str| -> Result<&str, String> {
        let quoted = format!("'{key}':");
        let at = text
            .find(&quoted)
            .ok_or_else(|| format!("the .npy header has no {key}"))?;
        Ok(text[at + quoted.len()..].trim_start())
    };
    let descr = value("descr")?;
    let descr = descr
        .strip_prefix('\'')
        .and_then(|d| d.split('\'').next())
        .ok_or("unreadable descr in the .npy header")?
        .to_string();
    let fortran_order = value("fortran_order")?.starts_with("True");
    let shape = value("shape")?;
    let shape = shape
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .ok_or("unreadable shape in the .npy header")?;
    let shape = shape
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<usize>()
                .map_err(|_| format!("bad dimension {s:?}"))
        })
        .collect::<Result<Vec<usize>, String>>()?;
    Ok(NpyHeader {
        descr,
        fortran_order,
        shape,
        data_offset: start + length,
    })
}

/// Whether a numpy array of this type and shape is a pack.
fn check_pack_array(descr: &str, fortran_order: bool, shape: &[usize]) -> Result<(), String> {
    if !matches!(descr, "<f4" | "=f4") {
        return Err(format!("dtype {descr}, not little-endian float32 (<f4)"));
    }
    if fortran_order && shape.iter().filter(|&&d| d > 1).count() > 1 {
        return Err("Fortran-ordered array; save it in C order".into());
    }
    if shape != [ROWS, 1, STYLE_DIM] && shape != [ROWS, STYLE_DIM] {
        return Err(format!("shape {shape:?}, not [510, 1, 256]"));
    }
    Ok(())
}

fn read_npy(path: &Path) -> Result<Pack, PackError> {
    let size = std::fs::metadata(path).map_err(io_error(path))?.len();
    if size > MAX_NPY_BYTES {
        return Err(invalid(
            path,
            format!("{size} bytes: too large for a voice pack"),
        ));
    }
    let bytes = std::fs::read(path).map_err(io_error(path))?;
    let header = npy_header(&bytes).map_err(|reason| invalid(path, reason))?;
    check_pack_array(&header.descr, header.fortran_order, &header.shape)
        .map_err(|reason| invalid(path, reason))?;
    let data = &bytes[header.data_offset..];
    if data.len() != VALUES * 4 {
        return Err(invalid(
            path,
            format!(
                "{} bytes of data, not {}: truncated?",
                data.len(),
                VALUES * 4
            ),
        ));
    }
    finite_pack(path, f32_values(data))
}

/// The member names of a voice archive, `.npy` suffix removed.
fn archive_members(path: &Path) -> Result<Vec<String>, PackError> {
    check_zip_magic(path)?;
    let archive = candle_core::npy::NpzTensors::new(path)
        .map_err(|e| invalid(path, format!("not a readable zip archive: {e}")))?;
    Ok(archive.names().into_iter().cloned().collect())
}

/// numpy's archives are zips; a kokoro-js pack misplaced as `voices.bin` is not one, and
/// saying so beats a zip library's complaint about a missing end-of-directory record.
fn check_zip_magic(path: &Path) -> Result<(), PackError> {
    let mut magic = [0u8; 4];
    let mut file = std::fs::File::open(path).map_err(io_error(path))?;
    let read = file.read(&mut magic).map_err(io_error(path))?;
    if read < 4 || &magic != b"PK\x03\x04" {
        return Err(invalid(
            path,
            "not a zip archive of .npy packs (numpy's .npz, kokoro-onnx's voices-v1.0.bin)",
        ));
    }
    Ok(())
}

fn read_member(path: &Path, id: &str) -> Result<Pack, PackError> {
    let member_error = |reason: String| PackError::Member {
        path: path.to_path_buf(),
        member: id.to_string(),
        reason,
    };
    let archive = candle_core::npy::NpzTensors::new(path)
        .map_err(|e| invalid(path, format!("not a readable zip archive: {e}")))?;
    // The header first: the data is read only once it is known to be a pack's size.
    let (shape, dtype) = archive
        .get_shape_and_dtype(id)
        .map_err(|e| member_error(e.to_string()))?;
    let descr = match dtype {
        candle_core::DType::F32 => "<f4".to_string(),
        other => format!("{other:?}"),
    };
    check_pack_array(&descr, false, shape.dims()).map_err(member_error)?;
    let tensor = archive
        .get(id)
        .map_err(|e| member_error(e.to_string()))?
        .ok_or_else(|| member_error("missing from the archive".into()))?;
    let values = tensor
        .flatten_all()
        .and_then(|t| t.to_vec1::<f32>())
        .map_err(|e| member_error(e.to_string()))?;
    match values.iter().position(|v| !v.is_finite()) {
        Some(at) => Err(member_error(format!("value {at} is {}", values[at]))),
        None => {
            Pack::from_values(values).ok_or_else(|| member_error("not 510 × 256 values".into()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Tensor};

    /// A pack whose every value tells where it is: row r, column c holds r + c / 1000.
    fn numbered() -> Vec<f32> {
        (0..VALUES)
            .map(|i| (i / STYLE_DIM) as f32 + (i % STYLE_DIM) as f32 / 1000.0)
            .collect()
    }

    fn raw_bytes(values: &[f32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_le_bytes()).collect()
    }

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/kokoro")
            .join(name)
    }

    #[test]
    fn voice_ids_give_language_and_gender() {
        let traits = |id| VoiceTraits::of(id).map(|t| (t.language, t.gender));
        assert_eq!(
            traits("af_heart"),
            Some((Language::AmericanEnglish, Gender::Female))
        );
        assert_eq!(
            traits("bm_george"),
            Some((Language::BritishEnglish, Gender::Male))
        );
        assert_eq!(
            traits("pm_santa"),
            Some((Language::BrazilianPortuguese, Gender::Male))
        );
        assert_eq!(
            traits("jf_alpha"),
            Some((Language::Japanese, Gender::Female))
        );
        assert_eq!(traits("zf_001"), Some((Language::Mandarin, Gender::Female)));
        for bad in [
            "",
            "a",
            "af",
            "af_",
            "ax_heart",
            "cf_heart",
            "afheart",
            "af_he-art",
            "af_he+art",
            "af_(1)",
            "af_hé",
            "AF_heart",
            "af heart",
        ] {
            assert_eq!(traits(bad), None, "{bad:?}");
        }
        assert!(!VoiceTraits::of("jf_alpha").unwrap().language.is_supported());
    }

    #[test]
    fn the_row_is_the_token_count_less_one_clamped_to_509() {
        let pack = Pack::from_values(numbered()).unwrap();
        assert_eq!(pack.style(0)[0], 0.0);
        assert_eq!(pack.style(1)[0], 0.0);
        // The oracle's "Hello world. This is a test.": 30 tokens, row 29.
        assert_eq!(pack.style(30)[0], 29.0);
        assert_eq!(pack.style(30)[255], 29.255);
        assert_eq!(pack.style(509)[0], 508.0);
        assert_eq!(pack.style(510)[0], 509.0);
        assert_eq!(pack.style(511)[0], 509.0);
        assert_eq!(pack.style(usize::MAX)[0], 509.0);
        assert_eq!(pack.style(7).len(), STYLE_DIM);
        assert!(Pack::from_values(vec![0.0; VALUES - 1]).is_none());
        let mut nan = numbered();
        nan[5] = f32::NAN;
        assert!(Pack::from_values(nan).is_none());
    }

    /// One pack in the three layouts (the `.npy` and `.npz` written by candle, an independent
    /// writer): the same values from each, and a scan that finds all of them.
    #[test]
    fn the_three_layouts_read_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let voices = dir.path().join("voices");
        std::fs::create_dir(&voices).unwrap();
        let values = numbered();
        std::fs::write(voices.join("af_raw.bin"), raw_bytes(&values)).unwrap();
        let tensor = Tensor::from_vec(values.clone(), (ROWS, 1, STYLE_DIM), &Device::Cpu).unwrap();
        tensor.write_npy(voices.join("bm_numpy.npy")).unwrap();
        let flat = tensor.reshape((ROWS, STYLE_DIM)).unwrap();
        Tensor::write_npz(
            &[("ef_one", &tensor), ("if_two", &flat), ("af_raw", &tensor)],
            dir.path().join("voices-v1.0.bin"),
        )
        .unwrap();
        std::fs::write(dir.path().join("voices.json"), b"{}").unwrap();
        std::fs::write(voices.join("notes.txt"), b"x").unwrap();

        let scanned = PackDir::scan(dir.path());
        let ids: Vec<&str> = scanned.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["af_raw", "bm_numpy", "ef_one", "if_two"]);
        // The single file wins over the archive member of the same id.
        assert_eq!(
            scanned.get("af_raw").unwrap().path(),
            voices.join("af_raw.bin")
        );
        for file in scanned.iter() {
            let pack = file.load().unwrap_or_else(|e| panic!("{}: {e}", file.id));
            assert_eq!(pack.values(), &values[..], "{}", file.id);
        }
        assert_eq!(
            scanned.get("if_two").unwrap().traits.language,
            Language::Italian
        );
    }

    fn load_error(dir: &Path, id: &str) -> String {
        let scanned = PackDir::scan(dir);
        let file = scanned.get(id).unwrap_or_else(|| panic!("{id} not found"));
        match file.load() {
            Ok(_) => panic!("{id} loaded"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn bad_packs_are_errors_that_name_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let voices = dir.path().join("voices");
        std::fs::create_dir(&voices).unwrap();
        let mut bytes = raw_bytes(&numbered());
        std::fs::write(voices.join("af_short.bin"), &bytes[..bytes.len() - 4]).unwrap();
        bytes[40..44].copy_from_slice(&f32::INFINITY.to_le_bytes());
        std::fs::write(voices.join("af_inf.bin"), &bytes).unwrap();
        let npy = voices.join("af_cut.npy");
        Tensor::from_vec(numbered(), (ROWS, 1, STYLE_DIM), &Device::Cpu)
            .unwrap()
            .write_npy(&npy)
            .unwrap();
        let whole = std::fs::read(&npy).unwrap();
        std::fs::write(&npy, &whole[..whole.len() - 100]).unwrap();
        std::fs::write(voices.join("af_text.npy"), b"not numpy at all").unwrap();
        Tensor::zeros((ROWS, 1, STYLE_DIM), candle_core::DType::F64, &Device::Cpu)
            .unwrap()
            .write_npy(voices.join("af_double.npy"))
            .unwrap();

        let short = load_error(dir.path(), "af_short");
        assert!(
            short.contains("af_short.bin") && short.contains("522236 bytes, not 522240"),
            "{short}"
        );
        let inf = load_error(dir.path(), "af_inf");
        assert!(
            inf.contains("af_inf.bin") && inf.contains("value 10 of the pack is inf"),
            "{inf}"
        );
        let cut = load_error(dir.path(), "af_cut");
        assert!(
            cut.contains("af_cut.npy") && cut.contains("truncated"),
            "{cut}"
        );
        let text = load_error(dir.path(), "af_text");
        assert!(
            text.contains("af_text.npy") && text.contains("magic"),
            "{text}"
        );
        let double = load_error(dir.path(), "af_double");
        assert!(
            double.contains("af_double.npy") && double.contains("<f8"),
            "{double}"
        );
    }

    /// Files written by numpy itself (scripts/kokoro_tokens_reference.py): its header layout
    /// parses, and its archives' errors name the archive and the member.
    #[test]
    fn numpy_files_are_read_or_refused_clearly() {
        let header = npy_header(&std::fs::read(fixture("shape-2x1x256.npy")).unwrap()).unwrap();
        assert_eq!(header.descr, "<f4");
        assert!(!header.fortran_order);
        assert_eq!(header.shape, [2, 1, 256]);
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("voices")).unwrap();
        std::fs::copy(
            fixture("shape-2x1x256.npy"),
            dir.path().join("voices/af_small.npy"),
        )
        .unwrap();
        std::fs::copy(fixture("compressed.npz"), dir.path().join("packs.npz")).unwrap();
        std::fs::copy(
            fixture("wrong-shape.npz"),
            dir.path().join("voices-v1.0.bin"),
        )
        .unwrap();

        let small = load_error(dir.path(), "af_small");
        assert!(
            small.contains("af_small.npy") && small.contains("shape [2, 1, 256]"),
            "{small}"
        );
        let compressed = load_error(dir.path(), "af_zip");
        assert!(
            compressed.contains("packs.npz") && compressed.contains("voice pack af_zip"),
            "{compressed}"
        );
        let wrong = load_error(dir.path(), "bf_wide");
        assert!(
            wrong.contains("voices-v1.0.bin")
                && wrong.contains("bf_wide")
                && wrong.contains("shape [5, 1, 256]"),
            "{wrong}"
        );
    }

    #[test]
    fn a_raw_pack_misnamed_as_an_archive_is_skipped_and_others_stay() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("voices")).unwrap();
        std::fs::write(dir.path().join("voices-v1.0.bin"), raw_bytes(&numbered())).unwrap();
        std::fs::write(dir.path().join("voices/am_ok.bin"), raw_bytes(&numbered())).unwrap();
        let scanned = PackDir::scan(dir.path());
        assert_eq!(scanned.len(), 1);
        assert!(scanned.get("am_ok").unwrap().load().is_ok());
        let error = archive_members(&dir.path().join("voices-v1.0.bin")).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("voices-v1.0.bin: not a zip archive"),
            "{error}"
        );
        assert!(PackDir::scan(&dir.path().join("missing")).is_empty());
    }

    #[test]
    fn hostile_npy_headers_are_refused_before_any_allocation() {
        let header = |dict: &str| {
            let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
            bytes.extend_from_slice(&(dict.len() as u16).to_le_bytes());
            bytes.extend_from_slice(dict.as_bytes());
            bytes
        };
        let huge =
            header("{'descr': '<f4', 'fortran_order': False, 'shape': (4000000000, 1000000), }");
        let parsed = npy_header(&huge).unwrap();
        assert!(check_pack_array(&parsed.descr, parsed.fortran_order, &parsed.shape).is_err());
        assert!(npy_header(&header("{'descr': '<f4', 'shape': (x,), }")).is_err());
        assert!(npy_header(b"\x93NUMPY\x01\x00\xff\xff{").is_err());
        assert!(npy_header(b"\x93NUMPY\x09\x00").is_err());
        assert!(npy_header(b"").is_err());
    }

    /// The real packs, when a Kokoro directory is at hand (`OMNIVOICE_TEST_KOKORO_DIR`): each
    /// loads, and kokoro-js's 54 ids are all there.
    #[test]
    fn real_packs_load_when_present() {
        let Some(dir) = std::env::var_os("OMNIVOICE_TEST_KOKORO_DIR") else {
            eprintln!("OMNIVOICE_TEST_KOKORO_DIR unset: real packs not checked");
            return;
        };
        let scanned = PackDir::scan(Path::new(&dir));
        assert!(scanned.len() >= 54, "{} packs", scanned.len());
        for id in super::super::names::V1_0_VOICES {
            let pack = scanned
                .get(id)
                .unwrap_or_else(|| panic!("{id} missing"))
                .load();
            let pack = pack.unwrap_or_else(|e| panic!("{e}"));
            assert!(pack.style(30).iter().any(|&v| v != 0.0), "{id}");
        }
    }
}
