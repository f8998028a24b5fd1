"""The voice studio around the playground (GET /) in a real headless Chromium, over WebDriver.

Usage: studio_test.py --url URL --screenshots DIR [--api-key KEY] --clip WAV --clip-text TEXT
       studio_test.py --url URL --no-checkpoint

Against a server with an OmniVoice checkpoint (tests/playground.rs starts one with the small
committed checkpoint), it checks that:
  - a voice designed from the pickers plays, and its request carries the design;
  - a bad design shows the server's message ("did you mean ...") at the description field;
  - an uploaded clip speaks, is saved as a profile, appears under Profiles, and speaking with
    the profile plays, as does its reference; its transcript changes alone (urlencoded) and
    with a new clip (multipart);
  - a recording from the browser's (fake) microphone becomes a WAV clip;
  - a two-speaker script plays as one track, and as one track per speaker;
  - the Code tab's curl line for the Speak tab's request (with a seed), run here, gives the
    very bytes the page played, and shows the key only as a placeholder;
and saves a screenshot of each tab at desktop and phone widths in DIR.
With --no-checkpoint (a server without OmniVoice, with Kokoro) the Design, Clone and Profiles
tabs must say why they cannot speak and show the command that fixes it, their buttons
disabled, and Kokoro's blend builder must write `af_bella(2)+af_sky(1)`.
Exits non-zero on the first failure."""

import argparse
import base64
import os
import subprocess
import sys
import tempfile

# Never let selenium look for or fetch a driver: the Debian packages provide both binaries.
os.environ.setdefault("SE_OFFLINE", "true")
# Importing playground_test must leave no __pycache__ in the source tree.
sys.dont_write_bytecode = True

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

from playground_test import Failure, browser, check  # noqa: E402

TIMEOUT_S = 90
TABS = ["speak", "design", "clone", "profiles", "script", "code"]
WIDTHS = {"desktop": (1280, 1000), "phone": (390, 844)}


def wait(driver, what, condition, timeout=TIMEOUT_S):
    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.05).until(lambda d: condition(d))
    except Exception as e:
        statuses = driver.execute_script(
            "return [...document.querySelectorAll('.tab-status, #status, #error')].map((e) => e.id + ':' + e.textContent);")
        results = driver.execute_script("return JSON.stringify(window.studio.results);")
        raise Failure(f"timed out waiting for {what}; statuses={statuses}; results={results}") from e


def by_id(driver, element_id):
    return driver.find_element(By.ID, element_id)


def show_tab(driver, name):
    by_id(driver, f"tab-{name}").click()
    check(by_id(driver, f"panel-{name}").is_displayed(), f"the {name} tab did not open")


def result(driver, tab):
    return driver.execute_script(f"return window.studio.results[{tab!r}] || null;")


def wait_played(driver, tab):
    wait(driver, f"audio to play in the {tab} tab",
         lambda d: (result(d, tab) or {}).get("played") or (result(d, tab) or {}).get("error"))
    outcome = result(driver, tab)
    check(outcome["error"] is None, f"the {tab} tab failed: {outcome['error']}")


def set_value(driver, element_id, value):
    element = by_id(driver, element_id)
    element.clear()
    element.send_keys(value)


def blob_bytes(driver, expression):
    """The bytes of a Blob the page holds, through base64."""
    encoded = driver.execute_async_script(f"""
        const done = arguments[arguments.length - 1];
        const reader = new FileReader();
        reader.onload = () => done(reader.result.split(',')[1]);
        reader.readAsDataURL({expression});
    """)
    return base64.b64decode(encoded)


def wait_loaded(driver, omnivoice):
    wait(driver, "the voices", lambda d: d.execute_script(
        "return window.studio && window.studio.listing.voices.length > 0;"))
    served = driver.execute_script("return Boolean(window.studio.listing.design_attributes);")
    check(served == omnivoice, f"OmniVoice served: {served}, expected {omnivoice}")


def check_design(driver):
    show_tab(driver, "design")
    Select(by_id(driver, "design-attribute-gender")).select_by_value("female")
    Select(by_id(driver, "design-attribute-pitch")).select_by_value("low pitch")
    set_value(driver, "panel-design-num_step", "4")
    # The knobs' ranges are the server's.
    step = by_id(driver, "panel-design-num_step")
    check((step.get_attribute("min"), step.get_attribute("max")) == ("1", "64"),
          f"num_step range {step.get_attribute('min')}..{step.get_attribute('max')}")
    by_id(driver, "design-speak").click()
    wait_played(driver, "design")
    sent = driver.execute_script("return window.studio.requests.design.json;")
    check(sent["instructions"] == "female, low pitch", f"the design request carried {sent}")
    check(sent["model"] == "omnivoice" and sent["num_step"] == 4, f"the design request was {sent}")

    set_value(driver, "design-text", "femal")
    by_id(driver, "design-speak").click()
    error = by_id(driver, "design-text-error")
    wait(driver, "the design error at its field", lambda d: error.is_displayed())
    check("did you mean 'female'" in error.text, f"the field shows {error.text!r}")
    check(by_id(driver, "design-text").get_attribute("aria-invalid") == "true", "the field is not marked invalid")
    set_value(driver, "design-text", "")


def check_clone_and_profiles(driver, clip, clip_text):
    show_tab(driver, "clone")
    by_id(driver, "clone-file").send_keys(os.path.abspath(clip))
    set_value(driver, "clone-ref-text", clip_text)
    set_value(driver, "panel-clone-num_step", "4")
    by_id(driver, "clone-speak").click()
    wait_played(driver, "clone")
    set_value(driver, "clone-profile-id", "browser-anna")
    by_id(driver, "clone-save").click()
    status = driver.find_element(By.CSS_SELECTOR, "#panel-clone .tab-status")
    wait(driver, "the profile to be saved", lambda d: "Saved as profile browser-anna" in status.text)

    show_tab(driver, "profiles")
    card = wait(driver, "the profile under Profiles", lambda d: d.find_elements(
        By.CSS_SELECTOR, '#profile-list [data-profile="browser-anna"]'))[0]
    check(card.find_element(By.CSS_SELECTOR, "input[type=text]").get_attribute("value") == clip_text,
          "the profile's transcript is not shown")
    card.find_element(By.CSS_SELECTOR, '[aria-label="Speak as browser-anna"]').click()
    wait_played(driver, "profiles")
    sent = driver.execute_script("return window.studio.requests.profiles.json;")
    check(sent["voice"] == "clone:browser-anna", f"spoke with {sent}")

    # The reference plays: the clip as stored (WAV).
    driver.execute_script("window.studio.results.profiles = null;")
    card.find_element(By.CSS_SELECTOR, '[aria-label="Play the reference of browser-anna"]').click()
    wait_played(driver, "profiles")
    reference = blob_bytes(driver, "window.studio.results.profiles.audio")
    check(reference[:4] == b"RIFF" and len(reference) > 44, f"the reference is {reference[:16]!r}")
    # Paused, so that its end does not write over what the tab says of the changes.
    driver.execute_script("document.querySelector('#panel-profiles .tab-player').pause();")
    # A new transcript alone (sent urlencoded), then a new clip with it (multipart).
    for new_text, new_clip in (("Changed in the browser", None), ("Changed again", clip)):
        card = driver.find_element(By.CSS_SELECTOR, '#profile-list [data-profile="browser-anna"]')
        transcript = card.find_element(By.CSS_SELECTOR, "input[type=text]")
        transcript.clear()
        transcript.send_keys(new_text)
        if new_clip:
            card.find_element(By.CSS_SELECTOR, "input[type=file]").send_keys(os.path.abspath(new_clip))
        # Marked, so that only the card drawn anew after the save can pass the wait below.
        driver.execute_script("arguments[0].dataset.before = 'save';", card)
        card.find_element(By.CSS_SELECTOR, '[aria-label="Save changes to browser-anna"]').click()
        # The list is drawn anew from the server once the change is saved, which says so.
        wait(driver, "the list to show the change", lambda d: d.execute_script(
            "const e = document.querySelector("
            "'#profile-list [data-profile=\"browser-anna\"]:not([data-before]) input[type=text]');"
            "return e !== null && e.value;") == new_text)
        status = driver.find_element(By.CSS_SELECTOR, "#panel-profiles .tab-status").text
        check(status == "Saved browser-anna.", f"the Profiles tab says {status!r}")


def check_recording(driver):
    """A recording from the (fake) microphone becomes a WAV clip the server can read."""
    show_tab(driver, "clone")
    by_id(driver, "clone-record").click()
    wait(driver, "the recording to start", lambda d: d.execute_script(
        "return clone.recorder !== null && clone.recorder.state === 'recording';"))
    driver.execute_script("clone.clip = null;")
    # A recording lasts as long as it is recorded: a moment of the fake microphone's tone.
    driver.execute_async_script("setTimeout(arguments[arguments.length - 1], 800);")
    by_id(driver, "clone-record-stop").click()
    wait(driver, "the recording to become the clip", lambda d: d.execute_script("return clone.clip !== null;"))
    recorded = blob_bytes(driver, "clone.clip")
    check(recorded[:4] == b"RIFF" and recorded[8:12] == b"WAVE", f"the recording is {recorded[:12]!r}")
    check(len(recorded) > 44 + 2 * 8000 * 0.5, f"the recording holds {len(recorded)} bytes")


def check_script(driver):
    show_tab(driver, "script")
    voices = driver.find_elements(By.CSS_SELECTOR, "#script-speakers .speaker-voice")
    check(len(voices) == 2, f"{len(voices)} speakers to start with")
    Select(voices[0]).select_by_value("omnivoice/alloy")
    Select(voices[1]).select_by_value("omnivoice/clone:browser-anna")
    for output, tracks in (("single_track", 0), ("multi_track", 2)):
        Select(by_id(driver, "script-output")).select_by_value(output)
        driver.execute_script("window.studio.results.script = null;")
        by_id(driver, "script-run").click()
        wait_played(driver, "script")
        sent = driver.execute_script("return window.studio.requests.script.json;")
        speakers = {line["speaker"] for line in sent["script"]}
        check(speakers == {"host", "guest"}, f"the script sent {sent}")
        check(sent["script"][1]["voice"] == "omnivoice/clone:browser-anna", f"the guest spoke with {sent}")
        shown = driver.find_elements(By.CSS_SELECTOR, "#script-tracks figure")
        check(len(shown) == tracks, f"{output}: {len(shown)} tracks shown")
        check(driver.find_elements(By.CSS_SELECTOR, "#script-tracks a[download]"), "no download link")


def check_code(driver, url, key):
    show_tab(driver, "speak")
    Select(by_id(driver, "engine")).select_by_value("omnivoice")
    Select(by_id(driver, "voice")).select_by_value("alloy")
    Select(by_id(driver, "format")).select_by_value("wav")
    set_value(driver, "seed", "42")
    set_value(driver, "text", "The same request, in code.")
    set_value(driver, "speak-knobs-num_step", "4")
    by_id(driver, "speak").click()
    wait(driver, "the Speak tab's audio", lambda d: d.execute_script(
        "return window.playground.stats.audio !== null || window.playground.stats.error !== null;"))
    check(driver.execute_script("return window.playground.stats.error;") is None, "the Speak tab failed")
    played = blob_bytes(driver, "window.playground.stats.audio")

    show_tab(driver, "code")
    Select(by_id(driver, "code-language")).select_by_value("curl")
    by_id(driver, "code-copy").click()
    code = by_id(driver, "code-text").text
    check(code.startswith("curl "), f"the curl code is {code!r}")
    check('"seed":42' in code and '"num_step":4' in code, f"the code lacks the form's fields: {code}")
    if key:
        check(key not in code, "the code shows the API key")
        check("$OMNIVOICE_API_KEY" in code, "the code has no key placeholder")
    for language, marker in (("python", "requests.post("), ("javascript", "await fetch("), ("openai", "OpenAI(")):
        Select(by_id(driver, "code-language")).select_by_value(language)
        shown = by_id(driver, "code-text").text
        check(marker in shown and (not key or key not in shown), f"{language}: {shown}")
    with tempfile.TemporaryDirectory() as work:
        env = dict(os.environ, OMNIVOICE_API_KEY=key or "")
        run = subprocess.run(["bash", "-c", code], cwd=work, env=env, capture_output=True, timeout=120)
        check(run.returncode == 0, f"curl failed: {run.stderr.decode()}")
        with open(os.path.join(work, "speech.wav"), "rb") as f:
            fetched = f.read()
    check(fetched[:4] == b"RIFF" and len(fetched) > 44, f"curl fetched {fetched[:60]!r}")
    check(fetched == played, f"curl's {len(fetched)} bytes differ from the {len(played)} the page played")


def screenshots(driver, directory):
    os.makedirs(directory, exist_ok=True)
    saved = []
    for width_name, (width, height) in WIDTHS.items():
        driver.set_window_size(width, height)
        for tab in TABS:
            show_tab(driver, tab)
            # The panel, not the page's header, fills the picture.
            driver.execute_script("document.querySelector('.tabs').scrollIntoView();")
            overflow = driver.execute_script(
                "return document.documentElement.scrollWidth > document.documentElement.clientWidth;")
            check(not overflow, f"the {tab} tab scrolls sideways at {width}px")
            path = os.path.join(directory, f"{tab}-{width_name}.png")
            driver.save_screenshot(path)
            saved.append(path)
    driver.set_window_size(*WIDTHS["desktop"])
    return saved


def check_keyboard(driver):
    """The tabs move with the arrow keys, Home and End, as WAI-ARIA's tab pattern has them."""
    from selenium.webdriver.common.keys import Keys

    show_tab(driver, "speak")
    by_id(driver, "tab-speak").send_keys(Keys.ARROW_RIGHT)
    check(by_id(driver, "panel-design").is_displayed(), "ArrowRight did not open Design")
    check(driver.switch_to.active_element.get_attribute("id") == "tab-design", "the focus stayed behind")
    by_id(driver, "tab-design").send_keys(Keys.END)
    check(by_id(driver, "panel-code").is_displayed(), "End did not open Code")
    by_id(driver, "tab-code").send_keys(Keys.ARROW_RIGHT)
    check(by_id(driver, "panel-speak").is_displayed(), "ArrowRight from the last tab did not wrap")


def check_no_checkpoint(driver):
    check_keyboard(driver)
    for tab, button in (("design", "design-speak"), ("clone", "clone-speak"), ("profiles", "profiles-reload")):
        show_tab(driver, tab)
        note = driver.find_element(By.CSS_SELECTOR, f"#panel-{tab} .needs-omnivoice")
        check(note.is_displayed(), f"the {tab} tab does not explain itself")
        check("No OmniVoice checkpoint" in note.text and "--omnivoice-dir" in note.text,
              f"the {tab} tab says {note.text!r}")
        check(not by_id(driver, button).is_enabled(), f"{button} is enabled without a checkpoint")
    # Kokoro's blend builder writes the blend syntax into the blend field.
    show_tab(driver, "speak")
    Select(by_id(driver, "engine")).select_by_value("kokoro")
    for voice, weight in (("af_bella", "2"), ("af_sky", "1")):
        by_id(driver, "blend-add").click()
        row = driver.find_elements(By.CSS_SELECTOR, "#blend-rows .blend-row")[-1]
        Select(row.find_element(By.TAG_NAME, "select")).select_by_value(voice)
        weight_box = row.find_element(By.CSS_SELECTOR, "input[type=number]")
        weight_box.clear()
        weight_box.send_keys(weight)
    blend = by_id(driver, "blend").get_attribute("value")
    check(blend == "af_bella(2)+af_sky(1)", f"the builder wrote {blend!r}")
    # The Script and Code tabs still work with the other engines.
    show_tab(driver, "script")
    check(len(driver.find_elements(By.CSS_SELECTOR, "#script-speakers .speaker-voice")) == 2,
          "no starting speakers without OmniVoice")


def run(args):
    with tempfile.TemporaryDirectory() as profile:
        driver = browser(profile)
        try:
            driver.set_script_timeout(30)
            driver.set_window_size(*WIDTHS["desktop"])
            driver.get(args.url + "/")
            if args.api_key:
                set_value(driver, "api-key", args.api_key)
                by_id(driver, "reload-voices").click()
            wait_loaded(driver, not args.no_checkpoint)
            if args.no_checkpoint:
                check_no_checkpoint(driver)
                return []
            check_design(driver)
            check_clone_and_profiles(driver, args.clip, args.clip_text)
            check_recording(driver)
            check_script(driver)
            check_code(driver, args.url, args.api_key)
            errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"
                      and "/v1/" not in e["message"]]
            check(not errors, f"the page logged errors: {errors}")
            return screenshots(driver, args.screenshots)
        except Exception:
            if args.screenshots:
                os.makedirs(args.screenshots, exist_ok=True)
                driver.save_screenshot(os.path.join(args.screenshots, "failure.png"))
            raise
        finally:
            driver.quit()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--screenshots", help="the directory for the screenshots")
    parser.add_argument("--api-key")
    parser.add_argument("--clip")
    parser.add_argument("--clip-text")
    parser.add_argument("--no-checkpoint", action="store_true")
    args = parser.parse_args()
    try:
        saved = run(args)
    except Failure as e:
        print(f"studio test failed: {e}", file=sys.stderr)
        return 1
    for path in saved:
        print(f"screenshot: {path}")
    print("studio test passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
