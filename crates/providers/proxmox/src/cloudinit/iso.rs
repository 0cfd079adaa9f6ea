//! The NoCloud seed image: an ISO 9660 file system labelled `cidata` holding `user-data`,
//! `meta-data` and, when not empty, `vendor-data` and `network-config`, built in memory.
//!
//! Upstream builds it with go-proxmox's `makeCloudInitISO` (go-diskfs, Rock Ridge and Joliet
//! on, 2048-byte blocks), uploads it to the node's ISO storage as `user-data-<vmid>.iso`
//! ([`iso_file_name`]), tags the VM `cloud-init` ([`VM_TAG`]) and attaches it as a CD-ROM.
//! The names here are readable the same three ways:
//!
//! * ISO 9660 level 1 (`USER_DAT.;1`), what every reader understands;
//! * Rock Ridge (RRIP 1.09: `SP`, `RR`, `PX`, `TF`, `NM`, and the `ER` record in a
//!   continuation area), which Linux's `iso9660` driver uses when it finds the `ER`, so
//!   cloud-init sees `user-data` when it mounts the disc;
//! * Joliet (UCS-2, level 3), for readers that prefer it.
//!
//! The image depends on nothing but the documents and the time passed in: the same input
//! gives the same bytes.
//!
//! Layout, in 2048-byte sectors: 0–15 system area (zero), 16 primary volume descriptor,
//! 17 Joliet supplementary volume descriptor, 18 terminator, 19–22 the path tables (primary
//! little/big endian, Joliet little/big endian), 23 the primary root directory, 24 the Rock
//! Ridge continuation area, 25 the Joliet root directory, then the files, each in its own
//! run of sectors.

use k8s_openapi::jiff::Timestamp;
use k8s_openapi::jiff::tz::TimeZone;

use super::NoCloud;

/// The volume label cloud-init's NoCloud source looks for.
pub const VOLUME_ID: &str = "cidata";
/// The tag upstream puts on a VM whose seed ISO it attached (go-proxmox's `TagCloudInit`).
pub const VM_TAG: &str = "cloud-init";

/// The name of VM `vmid`'s seed ISO on the node's ISO storage (go-proxmox's
/// `UserDataISOFormat`).
pub fn iso_file_name(vmid: u32) -> String {
    format!("user-data-{vmid}.iso")
}

const SECTOR: usize = 2048;
const PVD_SECTOR: usize = 16;
const SVD_SECTOR: usize = 17;
const TERMINATOR_SECTOR: usize = 18;
const PATH_L_SECTOR: usize = 19;
const PATH_M_SECTOR: usize = 20;
const JOLIET_PATH_L_SECTOR: usize = 21;
const JOLIET_PATH_M_SECTOR: usize = 22;
const ROOT_SECTOR: usize = 23;
const CONTINUATION_SECTOR: usize = 24;
const JOLIET_ROOT_SECTOR: usize = 25;
const FIRST_FILE_SECTOR: usize = 26;

/// The Rock Ridge extension reference (RRIP 1.09's own identifier and texts).
const RRIP_ID: &str = "RRIP_1991A";
const RRIP_DESCRIPTOR: &str =
    "THE ROCK RIDGE INTERCHANGE PROTOCOL PROVIDES SUPPORT FOR POSIX FILE SYSTEM SEMANTICS";
const RRIP_SOURCE: &str = "PLEASE CONTACT DISC PUBLISHER FOR SPECIFICATION SOURCE.  SEE PUBLISHER IDENTIFIER IN PRIMARY VOLUME DESCRIPTOR FOR CONTACT INFORMATION.";

/// `dr-xr-xr-x` directory and `r--r--r--` regular file modes.
const DIR_MODE: u32 = 0o040_555;
const FILE_MODE: u32 = 0o100_444;

/// The `RR` flags: which Rock Ridge entries a record carries.
const RR_PX: u8 = 0x01;
const RR_NM: u8 = 0x08;
const RR_TF: u8 = 0x80;

/// One file on the disc.
struct File<'a> {
    /// The Rock Ridge and Joliet name.
    name: &'static str,
    /// The ISO 9660 level 1 identifier.
    iso_name: &'static str,
    content: &'a [u8],
    sector: usize,
}

/// The seed image for `files`, dated `recorded`.
pub fn nocloud_iso(files: &NoCloud, recorded: Timestamp) -> Vec<u8> {
    // In identifier order, which ISO 9660 directories must keep (it is also the Joliet
    // names' order).
    let candidates: [(&'static str, &'static str, &str, bool); 4] = [
        ("meta-data", "META_DAT.;1", &files.meta_data, true),
        (
            "network-config",
            "NETWORK_.;1",
            &files.network_config,
            false,
        ),
        ("user-data", "USER_DAT.;1", &files.user_data, true),
        ("vendor-data", "VENDOR_D.;1", &files.vendor_data, false),
    ];
    let mut sector = FIRST_FILE_SECTOR;
    let mut entries = Vec::new();
    for (name, iso_name, content, always) in candidates {
        if !always && content.is_empty() {
            continue;
        }
        entries.push(File {
            name,
            iso_name,
            content: content.as_bytes(),
            sector,
        });
        // Every file gets a sector of its own, an empty one too.
        sector += content.len().div_ceil(SECTOR).max(1);
    }
    let total = sector;
    let date = RecordingDate::of(recorded);

    let mut image = vec![0u8; total * SECTOR];
    let at = |s: usize| s * SECTOR;

    let root = directory(&entries, &date, false);
    let joliet_root = directory(&entries, &date, true);
    let path_table_len = 10;
    for (joliet, s) in [(false, PVD_SECTOR), (true, SVD_SECTOR)] {
        let root_record = record(
            &[0],
            if joliet {
                JOLIET_ROOT_SECTOR
            } else {
                ROOT_SECTOR
            },
            SECTOR,
            true,
            &date,
            &[],
        );
        let vd = volume_descriptor(
            joliet,
            total,
            path_table_len,
            if joliet {
                JOLIET_PATH_L_SECTOR
            } else {
                PATH_L_SECTOR
            },
            if joliet {
                JOLIET_PATH_M_SECTOR
            } else {
                PATH_M_SECTOR
            },
            &root_record,
            recorded,
        );
        image[at(s)..at(s) + SECTOR].copy_from_slice(&vd);
    }
    let terminator = at(TERMINATOR_SECTOR);
    image[terminator] = 255;
    image[terminator + 1..terminator + 6].copy_from_slice(b"CD001");
    image[terminator + 6] = 1;
    for (s, root_sector, big_endian) in [
        (PATH_L_SECTOR, ROOT_SECTOR, false),
        (PATH_M_SECTOR, ROOT_SECTOR, true),
        (JOLIET_PATH_L_SECTOR, JOLIET_ROOT_SECTOR, false),
        (JOLIET_PATH_M_SECTOR, JOLIET_ROOT_SECTOR, true),
    ] {
        let table = path_table(root_sector, big_endian);
        image[at(s)..at(s) + table.len()].copy_from_slice(&table);
    }
    image[at(ROOT_SECTOR)..at(ROOT_SECTOR) + root.len()].copy_from_slice(&root);
    let er = extension_reference();
    image[at(CONTINUATION_SECTOR)..at(CONTINUATION_SECTOR) + er.len()].copy_from_slice(&er);
    image[at(JOLIET_ROOT_SECTOR)..at(JOLIET_ROOT_SECTOR) + joliet_root.len()]
        .copy_from_slice(&joliet_root);
    for file in &entries {
        image[at(file.sector)..at(file.sector) + file.content.len()].copy_from_slice(file.content);
    }
    image
}

/// A directory record's 7-byte recording date (UTC).
struct RecordingDate([u8; 7]);

impl RecordingDate {
    fn of(t: Timestamp) -> Self {
        let dt = t.to_zoned(TimeZone::UTC).datetime();
        let year = u8::try_from(dt.year() - 1900).unwrap_or(if dt.year() < 1900 { 0 } else { 255 });
        Self([
            year,
            dt.month() as u8,
            dt.day() as u8,
            dt.hour() as u8,
            dt.minute() as u8,
            dt.second() as u8,
            0,
        ])
    }
}

fn both_u16(v: u16) -> [u8; 4] {
    let [a, b] = v.to_le_bytes();
    [a, b, b, a]
}

fn both_u32(v: u32) -> [u8; 8] {
    let le = v.to_le_bytes();
    let be = v.to_be_bytes();
    [le[0], le[1], le[2], le[3], be[0], be[1], be[2], be[3]]
}

fn sector_u32(s: usize) -> u32 {
    u32::try_from(s).unwrap_or(u32::MAX)
}

/// A directory record (ECMA-119 9.1) with `system_use` (SUSP entries) after the identifier.
fn record(
    identifier: &[u8],
    sector: usize,
    length: usize,
    directory: bool,
    date: &RecordingDate,
    system_use: &[u8],
) -> Vec<u8> {
    let mut r = vec![0u8; 33];
    r[2..10].copy_from_slice(&both_u32(sector_u32(sector)));
    r[10..18].copy_from_slice(&both_u32(u32::try_from(length).unwrap_or(u32::MAX)));
    r[18..25].copy_from_slice(&date.0);
    r[25] = if directory { 0x02 } else { 0 };
    r[28..32].copy_from_slice(&both_u16(1));
    r[32] = identifier.len() as u8;
    r.extend_from_slice(identifier);
    if identifier.len().is_multiple_of(2) {
        r.push(0);
    }
    r.extend_from_slice(system_use);
    if !r.len().is_multiple_of(2) {
        r.push(0);
    }
    r[0] = r.len() as u8;
    r
}

fn susp(signature: &[u8; 2], body: &[u8]) -> Vec<u8> {
    let mut e = vec![signature[0], signature[1], (body.len() + 4) as u8, 1];
    e.extend_from_slice(body);
    e
}

/// The Rock Ridge entries of a record: `RR`, `PX`, `TF` and, for a named file, `NM`.
fn rock_ridge(mode: u32, links: u32, date: &RecordingDate, name: Option<&str>) -> Vec<u8> {
    let mut out = Vec::new();
    let flags = RR_PX | RR_TF | if name.is_some() { RR_NM } else { 0 };
    out.extend(susp(b"RR", &[flags]));
    let mut px = Vec::with_capacity(32);
    for v in [mode, links, 0, 0] {
        px.extend_from_slice(&both_u32(v));
    }
    out.extend(susp(b"PX", &px));
    // Modification, access and attribute change times, short form.
    let mut tf = vec![0x0e];
    for _ in 0..3 {
        tf.extend_from_slice(&date.0);
    }
    out.extend(susp(b"TF", &tf));
    if let Some(name) = name {
        let mut nm = vec![0];
        nm.extend_from_slice(name.as_bytes());
        out.extend(susp(b"NM", &nm));
    }
    out
}

/// The `ER` entry, kept in the continuation area (it does not fit a directory record).
fn extension_reference() -> Vec<u8> {
    let mut body = vec![
        RRIP_ID.len() as u8,
        RRIP_DESCRIPTOR.len() as u8,
        RRIP_SOURCE.len() as u8,
        1,
    ];
    body.extend_from_slice(RRIP_ID.as_bytes());
    body.extend_from_slice(RRIP_DESCRIPTOR.as_bytes());
    body.extend_from_slice(RRIP_SOURCE.as_bytes());
    susp(b"ER", &body)
}

fn ucs2(s: &str) -> Vec<u8> {
    s.encode_utf16().flat_map(u16::to_be_bytes).collect()
}

/// The root directory's extent: `.`, `..` and the files. For the primary tree the records
/// carry Rock Ridge entries, `.` also the `SP` marker and the continuation to the `ER`.
fn directory(files: &[File<'_>], date: &RecordingDate, joliet: bool) -> Vec<u8> {
    let sector = if joliet {
        JOLIET_ROOT_SECTOR
    } else {
        ROOT_SECTOR
    };
    let (dot_use, dotdot_use) = if joliet {
        (Vec::new(), Vec::new())
    } else {
        let mut dot = susp(b"SP", &[0xbe, 0xef, 0]);
        dot.extend(rock_ridge(DIR_MODE, 2, date, None));
        let mut ce = Vec::with_capacity(24);
        ce.extend_from_slice(&both_u32(sector_u32(CONTINUATION_SECTOR)));
        ce.extend_from_slice(&both_u32(0));
        ce.extend_from_slice(&both_u32(extension_reference().len() as u32));
        dot.extend(susp(b"CE", &ce));
        (dot, rock_ridge(DIR_MODE, 2, date, None))
    };
    let mut records = vec![
        record(&[0], sector, SECTOR, true, date, &dot_use),
        record(&[1], sector, SECTOR, true, date, &dotdot_use),
    ];
    for file in files {
        records.push(if joliet {
            record(
                &ucs2(file.name),
                file.sector,
                file.content.len(),
                false,
                date,
                &[],
            )
        } else {
            let rr = rock_ridge(FILE_MODE, 1, date, Some(file.name));
            record(
                file.iso_name.as_bytes(),
                file.sector,
                file.content.len(),
                false,
                date,
                &rr,
            )
        });
    }
    let extent: Vec<u8> = records.concat();
    // Four files' records fill well under a sector; the layout reserves one.
    debug_assert!(extent.len() <= SECTOR);
    extent
}

/// A path table holding the root alone.
fn path_table(root_sector: usize, big_endian: bool) -> Vec<u8> {
    let location = sector_u32(root_sector);
    let mut t = vec![1, 0];
    t.extend_from_slice(&if big_endian {
        location.to_be_bytes()
    } else {
        location.to_le_bytes()
    });
    t.extend_from_slice(&if big_endian {
        1u16.to_be_bytes()
    } else {
        1u16.to_le_bytes()
    });
    t.extend_from_slice(&[0, 0]);
    t
}

/// A text field padded with spaces (`joliet`: UCS-2 big endian, padded with UCS-2 spaces).
fn text_field(out: &mut [u8], text: &str, joliet: bool) {
    if joliet {
        for pair in out.chunks_mut(2) {
            pair[0] = 0;
            if pair.len() == 2 {
                pair[1] = b' ';
            }
        }
        let encoded = ucs2(text);
        let n = encoded.len().min(out.len() & !1);
        out[..n].copy_from_slice(&encoded[..n]);
    } else {
        out.fill(b' ');
        let n = text.len().min(out.len());
        out[..n].copy_from_slice(&text.as_bytes()[..n]);
    }
}

/// A volume descriptor date: `YYYYMMDDHHMMSScc` and the zone offset.
fn descriptor_date(t: Option<Timestamp>) -> [u8; 17] {
    let mut d = [b'0'; 17];
    d[16] = 0;
    if let Some(t) = t {
        let digits = t.strftime("%Y%m%d%H%M%S").to_string();
        if digits.len() == 14 {
            d[..14].copy_from_slice(digits.as_bytes());
        }
    }
    d
}

/// The primary (or, `joliet`, the Joliet supplementary) volume descriptor.
fn volume_descriptor(
    joliet: bool,
    total_sectors: usize,
    path_table_len: u32,
    path_l: usize,
    path_m: usize,
    root_record: &[u8],
    recorded: Timestamp,
) -> Vec<u8> {
    let mut vd = vec![0u8; SECTOR];
    vd[0] = if joliet { 2 } else { 1 };
    vd[1..6].copy_from_slice(b"CD001");
    vd[6] = 1;
    text_field(&mut vd[8..40], "", joliet);
    text_field(&mut vd[40..72], VOLUME_ID, joliet);
    vd[80..88].copy_from_slice(&both_u32(sector_u32(total_sectors)));
    if joliet {
        // UCS-2 level 3.
        vd[88..91].copy_from_slice(&[0x25, 0x2f, 0x45]);
    }
    vd[120..124].copy_from_slice(&both_u16(1));
    vd[124..128].copy_from_slice(&both_u16(1));
    vd[128..132].copy_from_slice(&both_u16(SECTOR as u16));
    vd[132..140].copy_from_slice(&both_u32(path_table_len));
    vd[140..144].copy_from_slice(&sector_u32(path_l).to_le_bytes());
    vd[148..152].copy_from_slice(&sector_u32(path_m).to_be_bytes());
    vd[156..156 + root_record.len()].copy_from_slice(root_record);
    // Volume set, publisher, data preparer, application; copyright, abstract and
    // bibliographic file names.
    for range in [
        190..318,
        318..446,
        446..574,
        574..702,
        702..739,
        739..776,
        776..813,
    ] {
        text_field(&mut vd[range], "", joliet);
    }
    vd[813..830].copy_from_slice(&descriptor_date(Some(recorded)));
    vd[830..847].copy_from_slice(&descriptor_date(Some(recorded)));
    vd[847..864].copy_from_slice(&descriptor_date(None));
    vd[864..881].copy_from_slice(&descriptor_date(None));
    vd[881] = 1;
    vd
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> NoCloud {
        NoCloud {
            user_data: "#cloud-config\n".to_string(),
            meta_data: "instance-id: 100\n".to_string(),
            vendor_data: String::new(),
            network_config: "network:\n  version: 2\n".to_string(),
        }
    }

    #[test]
    fn the_primary_descriptor_carries_the_label_size_and_date() {
        let t: Timestamp = "2025-03-04T05:06:07Z".parse().unwrap();
        let iso = nocloud_iso(&sample(), t);
        let pvd = &iso[16 * SECTOR..17 * SECTOR];
        assert_eq!(&pvd[0..7], b"\x01CD001\x01");
        assert_eq!(
            std::str::from_utf8(&pvd[40..72]).unwrap().trim_end(),
            "cidata"
        );
        // Three files, one sector each, after the 26 fixed sectors.
        assert_eq!(iso.len(), 29 * SECTOR);
        assert_eq!(u32::from_le_bytes(pvd[80..84].try_into().unwrap()), 29);
        assert_eq!(u32::from_be_bytes(pvd[84..88].try_into().unwrap()), 29);
        assert_eq!(&pvd[813..829], b"2025030405060700");
        let svd = &iso[17 * SECTOR..18 * SECTOR];
        assert_eq!(&svd[0..6], b"\x02CD001");
        assert_eq!(&svd[88..91], &[0x25, 0x2f, 0x45]);
        assert_eq!(&svd[40..52], &ucs2("cidata")[..]);
        assert_eq!(&iso[18 * SECTOR..18 * SECTOR + 7], b"\xffCD001\x01");
    }

    #[test]
    fn the_same_input_gives_the_same_image_and_the_date_is_the_only_clock() {
        let t: Timestamp = "2025-03-04T05:06:07Z".parse().unwrap();
        assert_eq!(nocloud_iso(&sample(), t), nocloud_iso(&sample(), t));
        let later: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        assert_ne!(nocloud_iso(&sample(), t), nocloud_iso(&sample(), later));
        assert_eq!(iso_file_name(20001), "user-data-20001.iso");
    }

    #[test]
    fn large_files_span_sectors_and_empty_optional_ones_are_left_out() {
        let t = Timestamp::UNIX_EPOCH;
        let mut files = sample();
        files.user_data = "x".repeat(SECTOR * 2 + 1);
        files.network_config = String::new();
        let iso = nocloud_iso(&files, t);
        // meta-data 1 sector, user-data 3.
        assert_eq!(iso.len(), (26 + 4) * SECTOR);
        let root = &iso[ROOT_SECTOR * SECTOR..];
        let names: Vec<&[u8]> = (0..4)
            .scan(0usize, |offset, _| {
                let len = root[*offset] as usize;
                let name_len = root[*offset + 32] as usize;
                let name = &root[*offset + 33..*offset + 33 + name_len];
                *offset += len;
                Some(name)
            })
            .collect();
        assert_eq!(
            names,
            vec![&b"\0"[..], b"\x01", b"META_DAT.;1", b"USER_DAT.;1"]
        );
    }
}
