import hashlib

from django import forms
from django.contrib import messages
from django.http import HttpResponseBadRequest, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt


def hello(request, name):
    """A template view: the name (autoescaped) and a loop over a list."""
    return render(request, "djangoproj/hello.html", {"name": name, "items": ["one", "two", "three"]})


class MessageForm(forms.Form):
    message = forms.CharField(max_length=100)


def message_form(request):
    """GET: the form with a CSRF token. POST: valid → 302 to thanks (with a
    flash message), invalid → 200 with the form's errors."""
    if request.method == "POST":
        form = MessageForm(request.POST)
        if form.is_valid():
            messages.success(request, "Got: " + form.cleaned_data["message"])
            return redirect("thanks")
    else:
        form = MessageForm()
    return render(request, "djangoproj/form.html", {"form": form})


def styled(request):
    """A page with a stylesheet from {% static %} (tests/browser_test.go)."""
    return render(request, "djangoproj/styled.html", {"scheme": request.scheme})


def thanks(request):
    return render(request, "djangoproj/thanks.html")


@csrf_exempt
def upload(request):
    """POST multipart with a "file" field: its name, size and sha256 as JSON."""
    if request.method != "POST" or "file" not in request.FILES:
        return HttpResponseBadRequest("POST a multipart form with a file field\n")
    f = request.FILES["file"]
    h = hashlib.sha256()
    size = 0
    for chunk in f.chunks():
        h.update(chunk)
        size += len(chunk)
    return JsonResponse({
        "name": f.name,
        "size": size,
        "sha256": h.hexdigest(),
        "storage": type(f).__name__,
        "note": request.POST.get("note", ""),
    })
